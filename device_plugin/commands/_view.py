"""What a kubelet sees, as text: shared by `demo` and `kubelet-standin` (no gRPC imports: the messages
arrive as objects with the ContainerAllocateResponse fields)."""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Any

VISIBLE = "NVIDIA_VISIBLE_DEVICES"


def allocate_summary(response: Any) -> str:
    """One line for a ContainerAllocateResponse: envs, then mounts, device nodes, annotations, CDI devices."""
    parts = [f"{key}={value}" for key, value in sorted(dict(response.envs).items())]
    if response.mounts:
        parts.append(f"{len(response.mounts)} mounts ({', '.join(m.container_path for m in response.mounts)})")
    if response.devices:
        parts.append(f"device nodes {', '.join(d.container_path for d in response.devices)}")
    parts += [f"annotation {key}={value}" for key, value in sorted(dict(response.annotations).items())]
    if response.cdi_devices:
        parts.append(f"CDI devices {', '.join(d.name for d in response.cdi_devices)}")
    return "; ".join(parts) or "(empty response)"


def health_changes(before: Iterable[Any], after: Iterable[Any]) -> list[str]:
    """`<id>: Healthy -> Unhealthy` for every listed device whose health changed, and additions/removals."""
    old = {d.id: d.health for d in before}
    new = {d.id: d.health for d in after}
    lines = [f"{i}: {old[i]} -> {new[i]}" for i in sorted(new) if i in old and old[i] != new[i]]
    lines += [f"{i}: added ({new[i]})" for i in sorted(set(new) - set(old))]
    lines += [f"{i}: removed" for i in sorted(set(old) - set(new))]
    return lines


class WarningsLogged(logging.Handler):
    """`with WarningsLogged() as w:` takes the place of the root logger's handlers, at WARNING and above, for its
    block: the demo prints what was logged as notes (its own log output is off unless --verbose), then the
    handlers and the level are put back."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.lines: list[str] = []
        self._saved: tuple[list[logging.Handler], int] | None = None

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())

    def __enter__(self) -> WarningsLogged:
        root = logging.getLogger()
        self._saved = (root.handlers[:], root.level)
        root.handlers[:] = [self]
        root.setLevel(min(root.level, logging.WARNING) or logging.WARNING)
        return self

    def __exit__(self, *_: object) -> None:
        assert self._saved is not None
        root = logging.getLogger()
        root.handlers[:], level = self._saved
        root.setLevel(level)
