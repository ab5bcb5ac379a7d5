"""The catalog of machine descriptions: the shipped machines by name, or a description file by path.

Shipped machines live in device_plugin/machines/<name>.yaml. `--machine` accepts such a name or a
path to a file. Which backend a process uses (real or fake) is backends.py's choice.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path

from device_plugin.core.errors import MachineDescriptionError
from device_plugin.nvml.fake.description import (
    MachineDescription,
    load_machine_file,
    parse_machine_yaml,
)

_SUFFIX = ".yaml"


def _machines_dir() -> resources.abc.Traversable:
    return resources.files("device_plugin") / "machines"


def shipped_machine_names() -> tuple[str, ...]:
    """Names of the machine descriptions that ship with the package, sorted."""
    return tuple(
        sorted(
            entry.name.removesuffix(_SUFFIX)
            for entry in _machines_dir().iterdir()
            if entry.is_file() and entry.name.endswith(_SUFFIX)
        )
    )


def load_machine_description(name_or_path: str) -> MachineDescription:
    """A shipped machine by name, or a machine-description file by path."""
    names = shipped_machine_names()
    if name_or_path in names:
        resource = _machines_dir() / f"{name_or_path}{_SUFFIX}"
        return parse_machine_yaml(
            resource.read_text(encoding="utf-8"), source=f"shipped machine {name_or_path}"
        )
    given = Path(name_or_path)
    if given.suffix in (".yaml", ".yml") or len(given.parts) > 1 or given.is_file():
        path = given.absolute()  # messages name it in full: the working directory is not in the log
        if not path.is_file():
            raise MachineDescriptionError("machine", f"no machine-description file at {path}")
        return load_machine_file(path)
    raise MachineDescriptionError(
        "machine",
        f"unknown machine {name_or_path!r}; shipped machines: {', '.join(names)}; or give a path "
        "to a file",
    )
