"""A DRA kubelet stand-in: what the kubelet's plugin watcher and DRA manager do with a driver's sockets.

It watches the plugins_registry directory (polling for new sockets, where the kubelet uses inotify),
calls GetInfo over the socket, checks type and versions as the kubelet does (the newest version it
knows, else a refusal), reports back through NotifyRegistrationStatus, and then calls
NodePrepareResources / NodeUnprepareResources on the endpoint GetInfo named, over real unix sockets.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

import grpc

from api import dra_v1_pb2, dra_v1_pb2_grpc, dra_v1beta1_pb2, dra_v1beta1_pb2_grpc
from api import pluginregistration_pb2 as reg_pb2
from api import pluginregistration_pb2_grpc as reg_grpc

KNOWN = {"v1.DRAPlugin": (dra_v1_pb2, dra_v1_pb2_grpc), "v1beta1.DRAPlugin": (dra_v1beta1_pb2, dra_v1beta1_pb2_grpc)}


@dataclass
class Registered:
    name: str
    endpoint: str
    version: str


class DraKubeletStandin:
    def __init__(self, registry_dir: Path, known_versions: tuple[str, ...] = ("v1.DRAPlugin", "v1beta1.DRAPlugin")):
        self.registry_dir = registry_dir
        self.known = known_versions
        self.plugins: dict[str, Registered] = {}

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
                reg_pb2.RegistrationStatus(plugin_registered=not error, error=error), timeout=2
            )
            if error:
                raise RuntimeError(error)
            registered = Registered(info.name, info.endpoint, usable[0])
            self.plugins[info.name] = registered
            return registered

    def _stub(self, plugin: Registered) -> tuple[ModuleType, grpc.Channel, object]:
        pb, pb_grpc = KNOWN[plugin.version]
        channel = grpc.insecure_channel(f"unix://{plugin.endpoint}")
        return pb, channel, pb_grpc.DRAPluginStub(channel)

    def prepare(self, plugin: Registered, claims: list[tuple[str, str, str]]) -> dict[str, object]:
        pb, channel, stub = self._stub(plugin)
        with channel:
            request = pb.NodePrepareResourcesRequest(
                claims=[pb.Claim(namespace=n, uid=u, name=m) for n, u, m in claims]
            )
            response = stub.NodePrepareResources(request, timeout=5)  # type: ignore[attr-defined]
        missing = {u for _, u, _ in claims} - set(response.claims)
        if missing:  # the kubelet treats a left-out claim as an error and calls again
            raise AssertionError(f"left out {len(missing)} claims")
        return dict(response.claims)

    def unprepare(self, plugin: Registered, claims: list[tuple[str, str, str]]) -> dict[str, str]:
        pb, channel, stub = self._stub(plugin)
        with channel:
            request = pb.NodeUnprepareResourcesRequest(
                claims=[pb.Claim(namespace=n, uid=u, name=m) for n, u, m in claims]
            )
            response = stub.NodeUnprepareResources(request, timeout=5)  # type: ignore[attr-defined]
        return {uid: entry.error for uid, entry in response.claims.items()}
