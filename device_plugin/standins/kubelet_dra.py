"""A DRA kubelet stand-in: what the kubelet's plugin watcher and DRA manager do with a driver's
sockets.

It watches the plugins_registry directory (polling for new sockets, where the kubelet uses inotify),
calls GetInfo over the socket, checks type and versions as the kubelet does (the newest version it
knows, else a refusal), reports back through NotifyRegistrationStatus, and then calls
NodePrepareResources / NodeUnprepareResources on the endpoint GetInfo named, over real unix sockets.
When the registration lists a DRAResourceHealth version it knows (v1 preferred, as the 1.37 kubelet
does; v1alpha1 otherwise), watch_health() opens the NodeWatchResources stream the kubelet keeps per
plugin. Test harness and demo prop (`demo --mode dra`), not part of the daemon.
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import grpc

from api import (
    dra_health_v1_pb2,
    dra_health_v1_pb2_grpc,
    dra_health_v1alpha1_pb2,
    dra_health_v1alpha1_pb2_grpc,
    dra_v1_pb2,
    dra_v1_pb2_grpc,
    dra_v1beta1_pb2,
    dra_v1beta1_pb2_grpc,
)
from api import pluginregistration_pb2 as reg_pb2
from api import pluginregistration_pb2_grpc as reg_grpc

KNOWN = {
    "v1.DRAPlugin": (dra_v1_pb2, dra_v1_pb2_grpc),
    "v1beta1.DRAPlugin": (dra_v1beta1_pb2, dra_v1beta1_pb2_grpc),
}
KNOWN_HEALTH = {
    "v1.DRAResourceHealth": (dra_health_v1_pb2, dra_health_v1_pb2_grpc),
    "v1alpha1.DRAResourceHealth": (dra_health_v1alpha1_pb2, dra_health_v1alpha1_pb2_grpc),
}


@dataclass
class Registered:
    name: str
    endpoint: str
    version: str
    # the DRAResourceHealth version the kubelet would watch; None: none
    health_version: str | None = None


class HealthWatch:
    """One NodeWatchResources stream, read on its own thread into a queue (the kubelet's health
    watcher)."""

    def __init__(self, endpoint: str, version: str) -> None:
        pb, pb_grpc = KNOWN_HEALTH[version]
        self._channel = grpc.insecure_channel(f"unix://{endpoint}")
        self._call = pb_grpc.DRAResourceHealthStub(self._channel).NodeWatchResources(
            pb.NodeWatchResourcesRequest()
        )
        self.responses: queue.Queue[object] = queue.Queue()
        self.error: grpc.RpcError | None = None
        self._thread = threading.Thread(target=self._read, name="health-watch", daemon=True)
        self._thread.start()

    def _read(self) -> None:
        try:
            for response in self._call:
                self.responses.put(response)
        except grpc.RpcError as error:
            self.error = error
        self.responses.put(None)  # the stream ended

    def next(self, timeout_s: float = 5.0) -> object:
        """The next response; None when the stream ended. queue.Empty after `timeout_s`."""
        return self.responses.get(timeout=timeout_s)

    def until(
        self, check: Callable[[dict[str, tuple[int, str]]], bool], timeout_s: float = 10.0
    ) -> dict:
        """Read until a response's {device: (health, message)} satisfies `check`; that mapping."""
        deadline = time.monotonic() + timeout_s
        while True:
            response = self.next(max(0.01, deadline - time.monotonic()))
            if response is None:
                raise AssertionError(f"the health stream ended: {self.error}")
            listed = response.devices  # type: ignore[attr-defined]
            devices = {d.device.device_name: (d.health, d.message) for d in listed}
            if check(devices):
                return devices

    def close(self) -> None:
        self._call.cancel()
        self._channel.close()
        self._thread.join(timeout=5.0)


class DraKubeletStandin:
    def __init__(
        self,
        registry_dir: Path,
        known_versions: tuple[str, ...] = ("v1.DRAPlugin", "v1beta1.DRAPlugin"),
        # newest first; a 1.34-1.36 kubelet: v1alpha1 only
        known_health: tuple[str, ...] = tuple(KNOWN_HEALTH),
    ):
        self.registry_dir = registry_dir
        self.known = known_versions
        self.known_health = known_health
        self.plugins: dict[str, Registered] = {}
        self._by_socket: dict[Path, Registered] = {}  # every registration socket seen, oldest first
        self._watching = threading.Lock()  # current() from more than one thread: one plugin watcher

    def current(self, name: str) -> Registered | None:
        """The instance of driver `name` a 1.33+ kubelet sends calls to now: of the registration
        sockets in the folder, the most recently registered one still there (a removed socket is a
        deregistration; a new one is registered on sight, as the plugin watcher does). None: no
        instance is registered."""
        with self._watching:
            present = set(self.registry_dir.glob("*.sock"))
            self._by_socket = {sock: r for sock, r in self._by_socket.items() if sock in present}
            for sock in sorted(present - set(self._by_socket)):
                registered = self._register(sock)
                if registered is not None:
                    self._by_socket[sock] = registered
            named = [r for r in self._by_socket.values() if r.name == name]
            return named[-1] if named else None

    def wait_for_plugin(self, timeout_s: float = 10.0) -> Registered:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            for sock in sorted(self.registry_dir.glob("*.sock")):
                registered = self._register(sock)
                if registered is not None:
                    return registered
            time.sleep(0.05)
        raise TimeoutError(f"no plugin registered in {self.registry_dir}")

    def _register(self, sock: Path) -> Registered | None:
        with grpc.insecure_channel(f"unix://{sock}") as channel:
            stub = reg_grpc.RegistrationStub(channel)
            try:
                info = stub.GetInfo(reg_pb2.InfoRequest(), timeout=2)
            except grpc.RpcError:
                return None  # not serving yet: the kubelet retries too
            usable = [v for v in self.known if v in info.supported_versions]
            error = ""
            if info.type != "DRAPlugin":
                error = f"unexpected plugin type {info.type!r}"
            elif not usable:
                error = f"none of the versions {list(info.supported_versions)} is supported"
            stub.NotifyRegistrationStatus(
                reg_pb2.RegistrationStatus(plugin_registered=not error, error=error), timeout=10
            )  # not retried like GetInfo: a bound for a loaded machine
            if error:
                raise RuntimeError(error)
            health = [v for v in self.known_health if v in info.supported_versions]
            registered = Registered(
                info.name, info.endpoint, usable[0], health[0] if health else None
            )
            self.plugins[info.name] = registered
            return registered

    def watch_health(self, plugin: Registered, version: str | None = None) -> HealthWatch:
        """Open the health stream (the version the registration offered, unless `version` is
        given)."""
        chosen = version or plugin.health_version
        if chosen is None:
            raise AssertionError(f"plugin {plugin.name} offers no DRAResourceHealth version")
        return HealthWatch(plugin.endpoint, chosen)

    def _stub(self, plugin: Registered) -> tuple[ModuleType, grpc.Channel, object]:
        pb, pb_grpc = KNOWN[plugin.version]
        channel = grpc.insecure_channel(f"unix://{plugin.endpoint}")
        return pb, channel, pb_grpc.DRAPluginStub(channel)

    def _send(self, plugin: Registered, call: str, claims: list[tuple[str, str, str]]) -> Any:
        """One NodePrepareResources or NodeUnprepareResources call, as the kubelet sends it."""
        pb, channel, stub = self._stub(plugin)
        with channel:
            request = getattr(pb, f"{call}Request")(
                claims=[pb.Claim(namespace=n, uid=u, name=m) for n, u, m in claims]
            )
            return getattr(stub, call)(request, timeout=5)

    def prepare(self, plugin: Registered, claims: list[tuple[str, str, str]]) -> dict[str, object]:
        response = self._send(plugin, "NodePrepareResources", claims)
        missing = {u for _, u, _ in claims} - set(response.claims)
        if missing:  # the kubelet treats a left-out claim as an error and calls again
            raise AssertionError(f"left out {len(missing)} claims")
        return dict(response.claims)

    def unprepare(self, plugin: Registered, claims: list[tuple[str, str, str]]) -> dict[str, str]:
        response = self._send(plugin, "NodeUnprepareResources", claims)
        return {uid: entry.error for uid, entry in response.claims.items()}
