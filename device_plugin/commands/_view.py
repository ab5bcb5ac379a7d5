"""What a kubelet sees, as text: shared by `demo` and `kubelet-standin` (no gRPC imports: the
messages arrive as objects with the ContainerAllocateResponse fields)."""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Any

VISIBLE = "NVIDIA_VISIBLE_DEVICES"


def allocate_summary(response: Any) -> str:
    """One line for a ContainerAllocateResponse: envs, then mounts, device nodes, annotations, CDI
    devices."""
    parts = [f"{key}={value}" for key, value in sorted(dict(response.envs).items())]
    if response.mounts:
        parts.append(
            f"{len(response.mounts)} mounts "
            f"({', '.join(m.container_path for m in response.mounts)})"
        )
    if response.devices:
        parts.append(f"device nodes {', '.join(d.container_path for d in response.devices)}")
    parts += [
        f"annotation {key}={value}" for key, value in sorted(dict(response.annotations).items())
    ]
    if response.cdi_devices:
        parts.append(f"CDI devices {', '.join(d.name for d in response.cdi_devices)}")
    return "; ".join(parts) or "(empty response)"


def health_changes(before: Iterable[Any], after: Iterable[Any]) -> list[str]:
    """`<id>: Healthy -> Unhealthy` for every listed device whose health changed, and
    additions/removals."""
    old = {d.id: d.health for d in before}
    new = {d.id: d.health for d in after}
    lines = [f"{i}: {old[i]} -> {new[i]}" for i in sorted(new) if i in old and old[i] != new[i]]
    lines += [f"{i}: added ({new[i]})" for i in sorted(set(new) - set(old))]
    lines += [f"{i}: removed" for i in sorted(set(old) - set(new))]
    return lines


class WarningsLogged(logging.Handler):
    """`with WarningsLogged("device_plugin.timeslice") as w:` collects what that logger logs at
    WARNING and above in its block.
    The demo prints it as notes: its own log output is off unless --verbose, and then nothing else
    changes (the line also goes to the log as usual)."""

    def __init__(self, logger_name: str) -> None:
        super().__init__(logging.WARNING)
        self.lines: list[str] = []
        self._logger = logging.getLogger(logger_name)
        self._saved: tuple[int, bool] | None = None

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())

    def __enter__(self) -> WarningsLogged:
        self._logger.addHandler(self)
        # quiet demo: heard here only, not printed twice
        if not self._logger.isEnabledFor(logging.WARNING):
            self._saved = (self._logger.level, self._logger.propagate)
            self._logger.setLevel(logging.WARNING)
            self._logger.propagate = False
        return self

    def __exit__(self, *_: object) -> None:
        self._logger.removeHandler(self)
        if self._saved is not None:
            level, self._logger.propagate = self._saved
            self._logger.setLevel(level)
