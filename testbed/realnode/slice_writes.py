"""Every write to a driver's ResourceSlices as the real API server reports it: a watch through kubectl.

`SliceWrites` runs `kubectl get resourceslices -w --output-watch-events` in the background and keeps each
event (its time, its type, the slice's pool generation). Counting them is how the tests and benchmarks
tell a write storm from one write per claim change.
"""

from __future__ import annotations

import json
import subprocess
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path


@dataclass(frozen=True)
class SliceEvent:
    at_s: float  # time.monotonic() when it arrived
    kind: str  # ADDED, MODIFIED, DELETED
    name: str
    generation: int


@dataclass
class SliceWrites:
    kubectl: Path
    kubeconfig: Path
    driver: str
    events: list[SliceEvent] = field(default_factory=list)
    _process: subprocess.Popen[str] | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def start(self) -> SliceWrites:
        self._process = subprocess.Popen(
            [str(self.kubectl), f"--kubeconfig={self.kubeconfig}", "get", "resourceslices", "-w",
             "--output-watch-events", "-o", "json", f"--field-selector=spec.driver={self.driver}"],
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
        )  # fmt: skip
        threading.Thread(target=self._read, name="slice-writes", daemon=True).start()
        time.sleep(1.0)  # the initial ADDED events of what exists are not writes: let them pass
        self.clear()
        return self

    def _read(self) -> None:
        assert self._process is not None and self._process.stdout is not None
        decoder = json.JSONDecoder()
        buffer = ""
        for line in self._process.stdout:
            buffer += line
            try:
                event, end = decoder.raw_decode(buffer.lstrip())
            except json.JSONDecodeError:
                continue  # an object spans several lines: read on
            buffer = buffer.lstrip()[end:]
            obj = event.get("object", {})
            found = SliceEvent(
                time.monotonic(), str(event.get("type")), obj.get("metadata", {}).get("name", ""),
                int(obj.get("spec", {}).get("pool", {}).get("generation", 0)),
            )  # fmt: skip
            with self._lock:
                self.events.append(found)

    def count(self) -> int:
        with self._lock:
            return len(self.events)

    def since(self, mark: int) -> list[SliceEvent]:
        with self._lock:
            return list(self.events[mark:])

    def clear(self) -> None:
        with self._lock:
            self.events.clear()

    def settle(self, quiet_s: float = 2.0, timeout_s: float = 30.0) -> None:
        """Wait until no event has arrived for `quiet_s`, counted from now at the earliest (a write on its way is
        waited for); a storm never settles: the timeout ends it."""
        began = time.monotonic()
        deadline = began + timeout_s
        while time.monotonic() < deadline:
            with self._lock:
                last = self.events[-1].at_s if self.events else 0.0
            if time.monotonic() - max(last, began) >= quiet_s:
                return
            time.sleep(0.2)

    def stop(self) -> None:
        if self._process is not None:
            self._process.kill()
            self._process.wait(timeout=10)
