"""CLI subcommands, one module each. Every module defines:

    NAME: str                                  the subcommand
    HELP: str                                  one line for --help
    def add_arguments(parser) -> None          its flags
    def run(args) -> int                       the exit code (2 for invalid input)

device_plugin.cli imports the modules listed in COMMAND_MODULES.
"""

COMMAND_MODULES = (
    "device_plugin.commands.run",
    "device_plugin.commands.demo",
    "device_plugin.commands.topology",
    "device_plugin.commands.allocate",
    "device_plugin.commands.simulate",
    "device_plugin.commands.labels",
    "device_plugin.commands.standin",
    "device_plugin.commands.dra",
)
