"""One unary call on one of our sockets within a deadline: does the server behind it answer?

Boundary: channels and the cache; which call to make is the caller's (`call(channel, timeout_s)`,
raising grpc.RpcError when it fails). One answer per socket is reused for `max_age_s`, so a storm of
/healthz requests costs one call; one channel per socket path is kept until close().
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path

import grpc

ProbeCall = Callable[[grpc.Channel, float], object]


class SocketProbe:
    def __init__(self, timeout_s: float, max_age_s: float) -> None:
        self._timeout_s = timeout_s
        self._max_age_s = max_age_s
        self._lock = threading.Lock()
        self._last: dict[Path, tuple[float, bool, str]] = {}  # path -> (when, ok, detail)
        self._channels: dict[Path, grpc.Channel] = {}

    def check(self, path: Path, call_name: str, call: ProbeCall) -> tuple[bool, str]:
        """(True, "<name> answers") or (False, why), at most `max_age_s` old."""
        with self._lock:
            last = self._last.get(path)
            if last is not None and time.monotonic() - last[0] < self._max_age_s:
                return last[1], last[2]
            channel = self._channels.get(path)
            if channel is None:
                # the whole OS limit
                channel = self._channels[path] = grpc.insecure_channel(f"unix:{path}")
            try:
                call(channel, self._timeout_s)
                ok, detail = True, f"{path.name} answers"
            except grpc.RpcError as error:
                code = error.code().name if hasattr(error, "code") else "UNKNOWN"
                ok, detail = (
                    False,
                    f"{path} did not answer {call_name} within {self._timeout_s:g} s ({code})",
                )
            self._last[path] = (time.monotonic(), ok, detail)
            return ok, detail

    def close(self) -> None:
        with self._lock:
            channels, self._channels = list(self._channels.values()), {}
            self._last.clear()
        for channel in channels:
            channel.close()
