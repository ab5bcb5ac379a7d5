"""CLI subcommands, one module each. Every module defines:

    NAME: str                                  the subcommand
    HELP: str                                  one line for --help
    def add_arguments(parser) -> None          its flags
    def run(args) -> int                       the exit code (2 for invalid input)

COMMAND_MODULES maps each subcommand's NAME to its module, in --help order. device_plugin.cli
imports only the module of the subcommand given (each start of the daemon or a tool is a process of
its own, and the DRA modules alone take ~0.4 s to import), and every module for top-level help.
"""

COMMAND_MODULES = {
    "run": "device_plugin.commands.run",
    "demo": "device_plugin.commands.demo",
    "topology": "device_plugin.commands.topology",
    "allocate": "device_plugin.commands.allocate",
    "simulate": "device_plugin.commands.simulate",
    "labels": "device_plugin.commands.labels",
    "kubelet-standin": "device_plugin.commands.standin",
    "dra": "device_plugin.commands.dra",
}
