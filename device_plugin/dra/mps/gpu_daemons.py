"""One MPS control daemon per shared GPU, shared by every share on it: started with the first share,
stopped after the last, restarted when it dies, adopted after a driver restart.

Boundary: counting and lifecycle over dra/mps/control_daemon.py; the shares themselves come from the
caller (dra/mps/share_setup.py: a share is a key, the claim UID and the share's index). Each GPU has
a lock of its own, so a start on one GPU never waits for another, and two Unprepares racing on one
GPU agree on which is the last: the count and the stop happen under that GPU's lock. The watch
thread (`start()`) checks each daemon that has shares every `interval_s`; one that is gone (killed,
or its pipe folder removed) is reported through `on_trouble(uuid, why)`, started again, and reported
fine (`on_trouble(uuid, "")`) once it answers; a failed restart stays reported and is tried at the
next check. `adopt` takes the shares of the checkpoint after a restart: each GPU's running daemon is
kept, a missing one started, and a daemon under the MPS root that no share needs is stopped (none is
left running without a share).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping, Set
from pathlib import Path

from device_plugin.dra.mps.control_daemon import MpsControlDaemon, MpsError, MpsFolders

log = logging.getLogger(__name__)


class GpuDaemons:
    def __init__(
        self,
        program: str,
        root: Path,
        *,
        on_trouble: Callable[[str, str], None] = lambda uuid, why: None,
        interval_s: float = 1.0,
        timeout_s: float = 10.0,
    ) -> None:
        self.root = root
        self._program, self._timeout_s = program, timeout_s
        self.on_trouble = on_trouble  # the front-end sets it to report the shares' health
        self._interval_s = interval_s
        self._lock = threading.Lock()  # guards the two maps below, never held across a daemon call
        self._gpu_locks: dict[str, threading.Lock] = {}
        self._users: dict[str, set[str]] = {}  # GPU UUID -> the shares on it
        # GPUs reported in trouble, until their daemon answers again
        self._troubled: set[str] = set()
        # how long each restart after a death took (benchmarks read it)
        self.restarts_s: list[float] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def daemon(self, uuid: str) -> MpsControlDaemon:
        return MpsControlDaemon(self._program, self.root, uuid, timeout_s=self._timeout_s)

    def folders(self, uuid: str) -> MpsFolders:
        return MpsFolders(self.root, uuid)

    def _gpu_lock(self, uuid: str) -> threading.Lock:
        with self._lock:
            return self._gpu_locks.setdefault(uuid, threading.Lock())

    def _counted(self, uuid: str) -> bool:
        """Whether GPU `uuid` has shares now."""
        with self._lock:
            return bool(self._users.get(uuid))

    def users(self) -> dict[str, frozenset[str]]:
        with self._lock:
            return {uuid: frozenset(keys) for uuid, keys in self._users.items() if keys}

    def acquire(self, uuid: str, key: str) -> None:
        """Share `key` is on GPU `uuid`: its daemon runs when this returns. MpsError: it cannot be
        started (the share is not counted then)."""
        with self._gpu_lock(uuid):
            self.daemon(uuid).start()
            with self._lock:
                self._users.setdefault(uuid, set()).add(key)

    def release(self, uuid: str, key: str) -> None:
        """Share `key` left GPU `uuid`: the daemon stops when it was the last. Never raises
        (logged)."""
        with self._gpu_lock(uuid):
            with self._lock:
                keys = self._users.get(uuid, set())
                keys.discard(key)
                last = not keys
                if last:
                    self._users.pop(uuid, None)
                    self._troubled.discard(uuid)
            if last:
                self._stop_quietly(uuid, "its last share left")

    def adopt(self, wanted: Mapping[str, Set[str]]) -> dict[str, str]:
        """The shares of each GPU now (from the checkpoint): daemons made to match. GPU UUID -> why
        its daemon could not be started (its shares are reported in trouble; the watch tries
        again)."""
        failed = {}
        with self._lock:
            self._users = {uuid: set(keys) for uuid, keys in wanted.items() if keys}
        for uuid in sorted(self._users):
            with self._gpu_lock(uuid):
                try:
                    self.daemon(uuid).start()
                except MpsError as error:
                    failed[uuid] = str(error)
                    self._report(uuid, str(error))
        for uuid in self._orphans(set(wanted)):
            with self._gpu_lock(uuid):
                if not self._counted(uuid):
                    self._stop_quietly(uuid, "no share needs it (left from before a restart)")
        return failed

    def _orphans(self, wanted: Set[str]) -> list[str]:
        try:
            found = sorted(
                p.parent.parent.name for p in self.root.glob("*/pipe/nvidia-cuda-mps-control.pid")
            )
        except OSError:
            return []
        return [uuid for uuid in found if uuid not in wanted]

    def check(self) -> None:
        """Each GPU with shares: its daemon restarted if it cannot serve (see the module
        docstring)."""
        for uuid in sorted(self.users()):
            with self._gpu_lock(uuid):
                if not self._counted(uuid):
                    continue  # its last share left meanwhile
                daemon = self.daemon(uuid)
                why = daemon.trouble()
                if not why:
                    self._recovered(uuid)
                    continue
                log.warning(
                    "GPU %s: %s: restarting it; its shares are reported unhealthy meanwhile",
                    uuid,
                    why,
                )
                self._report(uuid, why)
                began = time.monotonic()
                try:
                    # a daemon whose pipe folder went: it still runs, and must go first
                    daemon.stop()
                    daemon.start()
                except MpsError as error:
                    log.error("GPU %s: restarting the MPS control daemon failed: %s", uuid, error)
                    continue
                self.restarts_s.append(time.monotonic() - began)
                self._recovered(uuid)

    def _report(self, uuid: str, why: str) -> None:
        with self._lock:
            self._troubled.add(uuid)
        self.on_trouble(uuid, why)

    def _recovered(self, uuid: str) -> None:
        with self._lock:
            if uuid not in self._troubled:
                return
            self._troubled.discard(uuid)
        log.info("GPU %s: the MPS control daemon answers again", uuid)
        self.on_trouble(uuid, "")

    def _stop_quietly(self, uuid: str, why: str) -> None:
        try:
            self.daemon(uuid).stop()
            log.info("GPU %s: stopped its MPS control daemon: %s", uuid, why)
        except MpsError as error:
            log.error("GPU %s: %s", uuid, error)

    # ---- the watch thread ----------------------------------------------------------------------

    def start(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._watch, name="mps-daemons", daemon=True)
            self._thread.start()

    def _watch(self) -> None:
        while not self._stop.wait(self._interval_s):
            try:
                self.check()
            except Exception:  # a bug of ours must not end the watch
                log.exception("checking the MPS control daemons failed")

    def stop(self) -> None:
        """End the watch. The daemons stay: their shares' containers still use them (a restarted
        driver adopts them)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5.0)
