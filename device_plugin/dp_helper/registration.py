"""The clients of our gRPC: Register (tells the kubelet where a resource's plugin socket is) and
SelfProbe (calls GetDevicePluginOptions on our own socket: the liveness check behind /healthz).

One call per attempt (register); the lifecycle retries with core/backoff.py's schedule. A failure is
a RegistrationError with the kubelet's reason; it is never fatal to the daemon (the lifecycle
retries). Kubelets >= 1.25 dial the plugin, call GetDevicePluginOptions and open ListAndWatch
*inside* Register, so the deadline covers their 10 s dial plus those calls.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path

import grpc

from api import deviceplugin_pb2 as pb
from api import deviceplugin_pb2_grpc as pb_grpc
from device_plugin.core.errors import RegistrationError
from device_plugin.dp_helper.servicer import plugin_options

API_VERSION = "v1beta1"
KUBELET_SOCKET_NAME = "kubelet.sock"
_POLL_S = 0.05  # how often a waiting Register checks whether to give up


class RegistrationAbandoned(RegistrationError):
    """The caller gave up waiting (stop or kubelet restart); not the kubelet's refusal."""


def register(
    kubelet_socket: Path,
    endpoint: str,
    resource_name: str,
    *,
    timeout_s: float = 20.0,
    abandon: Callable[[], bool] = lambda: False,
) -> None:
    """Register `resource_name` served on `endpoint` (a file name in the kubelet socket's
    directory).

    `abandon` is polled while waiting: when it turns true (a kubelet restart, a stop) the call is
    cancelled and RegistrationAbandoned raised, so a kubelet that died mid-call cannot hold us for
    its whole dial timeout.
    """
    if "/" in endpoint:
        raise ValueError(f"endpoint must be a bare file name, got {endpoint!r}")
    request = pb.RegisterRequest(
        version=API_VERSION,
        endpoint=endpoint,
        resource_name=resource_name,
        options=plugin_options(),
    )
    deadline = time.monotonic() + timeout_s
    with grpc.insecure_channel(f"unix://{kubelet_socket}") as channel:
        ready = grpc.channel_ready_future(channel)
        _wait(
            ready,
            min(deadline, time.monotonic() + 5.0),
            abandon,
            f"kubelet at {kubelet_socket} not reachable",
        )
        call = pb_grpc.RegistrationStub(channel).Register.future(request, timeout=timeout_s)
        _wait(call, deadline, abandon, f"kubelet at {kubelet_socket} did not answer Register")
        try:
            call.result()
        except grpc.RpcError as error:
            code = error.code().name if hasattr(error, "code") else "UNKNOWN"
            details = error.details() if hasattr(error, "details") else str(error)
            raise RegistrationError(
                f"kubelet at {kubelet_socket} refused {resource_name}: {code}: {details}"
            ) from error


def _wait(
    future: grpc.Future, deadline: float, abandon: Callable[[], bool], timeout_message: str
) -> None:
    while True:
        try:
            future.result(timeout=min(_POLL_S, max(0.0, deadline - time.monotonic())))
            return
        except grpc.FutureTimeoutError:
            pass
        except grpc.RpcError:
            return  # the caller reads the error from the future
        if abandon():
            future.cancel()
            raise RegistrationAbandoned("registration abandoned (kubelet restart or stop)")
        if time.monotonic() >= deadline:
            future.cancel()
            raise RegistrationError(timeout_message)


class SelfProbe:
    """GetDevicePluginOptions on our own socket within `timeout_s`; one answer reused for
    `max_age_s` (a storm of /healthz requests costs one probe). One channel per socket path, kept
    until close()."""

    def __init__(self, timeout_s: float, max_age_s: float) -> None:
        self._timeout_s = timeout_s
        self._max_age_s = max_age_s
        self._lock = threading.Lock()
        self._last: tuple[float, bool, str] | None = None  # (when, ok, detail)
        self._channels: dict[Path, grpc.Channel] = {}

    def check(self, socket: Path) -> tuple[bool, str]:
        with self._lock:
            if self._last is not None and time.monotonic() - self._last[0] < self._max_age_s:
                return self._last[1], self._last[2]
            ok, detail = self._probe(socket)
            self._last = (time.monotonic(), ok, detail)
            return ok, detail

    def _probe(self, path: Path) -> tuple[bool, str]:
        channel = self._channels.get(path)
        if channel is None:
            channel = self._channels[path] = grpc.insecure_channel(f"unix://{path}")
        try:
            pb_grpc.DevicePluginStub(channel).GetDevicePluginOptions(
                pb.Empty(), timeout=self._timeout_s
            )
        except grpc.RpcError as error:
            code = error.code().name if hasattr(error, "code") else "UNKNOWN"
            return (
                False,
                f"{path.name} did not answer GetDevicePluginOptions within {self._timeout_s:g} s "
                f"({code})",
            )
        return True, f"{path.name} answers"

    def close(self) -> None:
        with self._lock:
            channels, self._channels = list(self._channels.values()), {}
        for channel in channels:
            channel.close()
