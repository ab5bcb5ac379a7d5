"""FakeEventsTail: faults injected from outside the process, as JSON lines appended to a file.

Boundary: reading and validating the file, nothing else; every valid line becomes a HealthEvent
handed to an `inject` callable (FakeNvml.test_hooks.inject for `run --machine X --fake-events
FILE`). One object per line, exactly one fault key besides "gpu" (the NVML index), and an optional
"detail" text; an Xid may
state the driver's recovery action (a name or number of device_plugin/nvml/recovery_action.py):

    {"gpu": 3, "xid": 79}
    {"gpu": 3, "xid": 94, "recovery_action": "GPU_RESET"}
    {"gpu": 3, "ecc": "double_bit"}
    {"gpu": 3, "lost": true}
    {"gpu": 3, "recovered": true, "detail": "reset by operator"}

A malformed line (or one the fake refuses, e.g. a GPU index the machine lacks) is logged and
skipped, never fatal. The file may not exist yet; it may be truncated or replaced (then it is read
from its start); a line is applied only once its newline is written. Polls every `poll_interval_s`.
"""

from __future__ import annotations

import json
import logging
import os
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from device_plugin.nvml.health_types import HealthEvent, HealthEventKind
from device_plugin.nvml.recovery_action import parse_recovery_action

log = logging.getLogger(__name__)

# a longer unfinished line is dropped, so a runaway writer cannot fill memory
MAX_LINE_BYTES = 64 * 1024
_FAULT_KEYS = ("xid", "ecc", "lost", "recovered")


def parse_fault_line(text: str) -> HealthEvent:
    """The HealthEvent one line asks for; ValueError says what is wrong with it."""
    try:
        record: Any = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"not JSON: {exc.msg} at column {exc.colno}") from exc
    if not isinstance(record, dict):
        raise ValueError(f"expected a JSON object, got {type(record).__name__}")
    unknown = sorted(set(record) - {"gpu", "detail", "recovery_action", *_FAULT_KEYS})
    if unknown:
        raise ValueError(
            f"unknown key(s) {', '.join(unknown)}; expected gpu, one of {', '.join(_FAULT_KEYS)}, "
            "detail, "
            "recovery_action"
        )
    gpu = record.get("gpu")
    if isinstance(gpu, bool) or not isinstance(gpu, int) or gpu < 0:
        raise ValueError(f'"gpu" must be a non-negative integer (the NVML index), got {gpu!r}')
    detail = record.get("detail", "")
    if not isinstance(detail, str):
        raise ValueError(f'"detail" must be a string, got {detail!r}')
    faults = [key for key in _FAULT_KEYS if key in record]
    if len(faults) != 1:
        raise ValueError(
            f"exactly one of {', '.join(_FAULT_KEYS)} is needed, got {faults or 'none'}"
        )
    key, value = faults[0], record[faults[0]]
    if key == "xid":
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise ValueError(f'"xid" must be a non-negative integer, got {value!r}')
        stated = record.get("recovery_action")
        action = None if stated is None else parse_recovery_action(stated, "recovery_action")
        return HealthEvent(
            gpu, HealthEventKind.XID, xid=value, detail=detail, recovery_action=action
        )
    if "recovery_action" in record:
        raise ValueError(
            '"recovery_action" goes with "xid" only (it is what the driver asks for after an Xid)'
        )
    if key == "ecc":
        if value != "double_bit":
            raise ValueError(
                f'"ecc" must be "double_bit" (single-bit errors are corrected), got {value!r}'
            )
        return HealthEvent(gpu, HealthEventKind.DOUBLE_BIT_ECC, detail=detail)
    if value is not True:
        raise ValueError(f'"{key}" must be true, got {value!r}')
    kind = HealthEventKind.LOST if key == "lost" else HealthEventKind.RECOVERED
    return HealthEvent(gpu, kind, detail=detail)


class FakeEventsTail:
    def __init__(
        self, path: Path, inject: Callable[[HealthEvent], None], *, poll_interval_s: float = 0.05
    ) -> None:
        self._path = Path(path)
        self._inject = inject
        self._poll_interval_s = poll_interval_s
        self._inode: int | None = None
        self._offset = 0
        self._partial = b""
        self._line_number = 0
        self.applied = 0
        self.skipped = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        log.info("reading fake health events from %s", self._path)
        self._thread = threading.Thread(target=self._loop, name="fake-events", daemon=True)
        self._thread.start()

    def stop(self, timeout_s: float = 1.0) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout_s)

    def _loop(self) -> None:
        while not self._stop.is_set():
            try:
                self.poll_once()
            # an unreadable file or a bug here must not end fault injection for good
            except Exception:
                log.exception("reading %s failed; trying again", self._path)
            self._stop.wait(self._poll_interval_s)

    def poll_once(self) -> int:
        """Apply every complete line appended since the last poll; returns how many were applied."""
        try:
            st = os.stat(self._path)
        except FileNotFoundError:
            self._restart(None)
            return 0
        if st.st_ino != self._inode:
            if self._inode is not None:
                log.info("%s was replaced; reading the new file from its start", self._path)
            self._restart(st.st_ino)
        elif st.st_size < self._offset:
            log.warning("%s was truncated; reading it again from its start", self._path)
            self._restart(st.st_ino)
        if st.st_size == self._offset:
            return 0
        with open(self._path, "rb") as file:
            file.seek(self._offset)
            data = file.read(st.st_size - self._offset)
        self._offset += len(data)
        *lines, self._partial = (self._partial + data).split(b"\n")
        if len(self._partial) > MAX_LINE_BYTES:
            log.warning(
                "%s: an unfinished line exceeds %d bytes; dropped", self._path, MAX_LINE_BYTES
            )
            self._partial = b""
            self.skipped += 1
        return sum(self._apply(line) for line in lines)

    def _restart(self, inode: int | None) -> None:
        self._inode, self._offset, self._partial, self._line_number = inode, 0, b"", 0

    def _apply(self, raw: bytes) -> bool:
        self._line_number += 1
        text = raw.decode("utf-8", "replace").strip()
        if not text:
            return False
        try:
            event = parse_fault_line(text)
            self._inject(event)
        # ValueError from parsing, NvmlError from the fake (unknown GPU), ...
        except Exception as exc:
            self.skipped += 1
            log.warning(
                "%s line %d skipped: %s (%s)", self._path, self._line_number, exc, text[:200]
            )
            return False
        self.applied += 1
        log.info(
            "%s line %d: injected %s on GPU %d",
            self._path,
            self._line_number,
            event.describe(),
            event.gpu_index,
        )
        return True
