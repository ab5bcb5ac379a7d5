"""A kubelet stand-in: the kubelet's side of the device-plugin contract, on real unix sockets.

Test harness and demo prop, not part of the daemon, and not the judge of what a kubelet does: the
real kubelet is (tests/real_node, docs/real-node.md). It stays for what the real one cannot do on
purpose: a kubelet of another generation (PR 135437), cancelled streams, hundreds of calls, and the
demo. It behaves
like kubelets >= 1.25:
- serves v1beta1.Registration on `<dir>/kubelet.sock`, refusing a wrong version or an invalid
  resource name with the kubelet's own messages;
- inside Register dials `<dir>/<endpoint>`, calls GetDevicePluginOptions and opens ListAndWatch in a
  thread that records every list; an older connection of the resource is not closed (the kubelet
  does not close it either);
- never retries a broken stream;
- keeps what each resource advertises, and what a stream's end does to it, by kubelet generation:
  one client per resource name by default, per (name, socket) with `clients_by_socket=True` (PR
  135437); see standin_manager.py;
- admits pods like the device manager: GetPreferredAllocation with the free healthy devices in
  shuffled order, then Allocate with one container request;
- restart(): stops, deletes every socket in the directory (and nothing else), re-creates
  kubelet.sock.
"""

from __future__ import annotations

import logging
import random
import stat
import threading
from collections.abc import Callable
from concurrent import futures
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

import grpc

from api import deviceplugin_pb2 as pb
from api import deviceplugin_pb2_grpc as pb_grpc
from device_plugin.standins.kubelet_device_manager import (
    AdmissionRefused as AdmissionRefused,  # re-exported for callers
)
from device_plugin.standins.kubelet_device_manager import (
    DeviceManagerModel,
    is_extended_resource_name,
)

log = logging.getLogger(__name__)

T = TypeVar("T")

SUPPORTED_VERSION = "v1beta1"
DIAL_TIMEOUT_S = 10.0


@dataclass(frozen=True)
class ListedDevice:
    id: str
    health: str
    numa_nodes: tuple[int, ...]


@dataclass(frozen=True)
class RegisterCall:
    version: str
    endpoint: str
    resource_name: str
    options: pb.DevicePluginOptions
    refusal: str | None  # the error the stand-in answered with, None when accepted


@dataclass
class PluginConnection:
    """One accepted registration: the channel to the plugin and what its stream delivered."""

    resource_name: str
    endpoint: str
    request_options: pb.DevicePluginOptions
    plugin_options: pb.DevicePluginOptions
    channel: grpc.Channel
    stub: pb_grpc.DevicePluginStub
    lists: list[tuple[ListedDevice, ...]] = field(default_factory=list)
    stream_ended: bool = False
    stream_error: str | None = None
    call: grpc.Future | None = None
    generation: int = 0  # the stand-in's restart count when it was accepted


@dataclass(frozen=True)
class Admission:
    """One pod container admitted for `resource`: what the plugin preferred and what Allocate
    gave."""

    requested: int
    available: tuple[str, ...]  # in the shuffled order sent
    preferred: tuple[str, ...]
    envs: dict[str, str]
    response: pb.ContainerAllocateResponse


class KubeletStandIn:
    def __init__(
        self,
        plugin_dir: Path,
        *,
        refuse_registrations: int = 0,
        seed: int = 0,
        clients_by_socket: bool = False,
    ) -> None:
        self.plugin_dir = Path(plugin_dir)
        self.socket_path = self.plugin_dir / "kubelet.sock"
        self._cond = threading.Condition()
        self._server: grpc.Server | None = None
        self._refuse_remaining = refuse_registrations
        self._rng = random.Random(seed)
        self.register_calls: list[RegisterCall] = []
        self.connections: list[PluginConnection] = []
        self._current: dict[str, PluginConnection] = {}
        self._allocated: dict[str, set[str]] = {}
        self._manager = DeviceManagerModel(clients_by_socket=clients_by_socket)

    # ---- server --------------------------------------------------------------------------------

    def start(self) -> None:
        server = grpc.server(futures.ThreadPoolExecutor(max_workers=8))
        pb_grpc.add_RegistrationServicer_to_server(_Registration(self), server)
        server.add_insecure_port(f"unix://{self.socket_path}")
        server.start()
        self._server = server

    def stop(self) -> None:
        if self._server is not None:
            self._server.stop(0.5).wait(2.0)
            self._server = None
        with self._cond:
            connections, self._current = list(self.connections), {}
            self._manager.reset()
            self._cond.notify_all()
        for connection in connections:
            _close(connection)

    def restart(self) -> list[str]:
        """Like a kubelet restart: every socket in the directory is deleted; returns their names."""
        self.stop()
        deleted = []
        for entry in sorted(self.plugin_dir.iterdir()):
            if stat.S_ISSOCK(entry.lstat().st_mode):
                entry.unlink()
                deleted.append(entry.name)
        with self._cond:
            self._allocated.clear()
        self.start()
        return deleted

    # ---- observation ---------------------------------------------------------------------------

    def wait_for(self, predicate: Callable[[], T | None], timeout_s: float) -> T:
        """Wait until `predicate()` is truthy (evaluated under the stand-in's lock); return its
        value."""
        with self._cond:
            result = self._cond.wait_for(predicate, timeout_s)
        if not result:
            raise TimeoutError(f"kubelet stand-in: condition not met within {timeout_s} s")
        return result

    def wait_for_connection(
        self, resource_name: str, count: int = 1, timeout_s: float = 10.0
    ) -> PluginConnection:
        """The current connection of `resource_name` once it is at least the `count`-th accepted
        registration and its first list arrived. (A registration the plugin abandoned may land too,
        so the current one is returned rather than the `count`-th.)"""

        def ready() -> PluginConnection | None:
            accepted = sum(1 for c in self.connections if c.resource_name == resource_name)
            current = self._current.get(resource_name)
            if (
                accepted >= count
                and current is not None
                and current.lists
                and not current.stream_ended
            ):
                return current
            return None

        return self.wait_for(ready, timeout_s)

    def current(self, resource_name: str) -> PluginConnection:
        with self._cond:
            return self._current[resource_name]

    def latest_devices(self, resource_name: str) -> tuple[ListedDevice, ...]:
        with self._cond:
            return self._current[resource_name].lists[-1]

    def healthy_count(self, resource_name: str) -> int:
        """How many healthy devices the resource advertises now (the node's allocatable)."""
        with self._cond:
            return len(self._manager.healthy(resource_name))

    def healthy_history(self, resource_name: str) -> list[tuple[float, int]]:
        """(monotonic time, healthy devices) at every change of the resource's count, oldest
        first."""
        with self._cond:
            return [(t, count) for t, name, count in self._manager.history if name == resource_name]

    # ---- pod admission -------------------------------------------------------------------------

    def admit(self, resource_name: str, count: int) -> Admission:
        """Admit one container asking for `count` devices. AdmissionRefused when the device manager
        refuses it before any RPC (the kubelet's messages); RPC errors propagate as
        grpc.RpcError."""
        with self._cond:
            allocated = self._allocated.setdefault(resource_name, set())
            endpoint, available = self._manager.endpoint_for_admission(
                resource_name, count, allocated
            )
            assert isinstance(endpoint, PluginConnection)
            connection = endpoint
            self._rng.shuffle(available)
        preferred_reply = connection.stub.GetPreferredAllocation(
            pb.PreferredAllocationRequest(
                container_requests=[
                    pb.ContainerPreferredAllocationRequest(
                        available_deviceIDs=available, allocation_size=count
                    )
                ]
            ),
            timeout=10.0,
        )
        preferred = tuple(preferred_reply.container_responses[0].deviceIDs)
        # Like the kubelet: keep what is available, fill any shortfall from the rest.
        chosen = [i for i in preferred if i in available][:count]
        chosen += [i for i in available if i not in chosen][: count - len(chosen)]
        reply = connection.stub.Allocate(
            pb.AllocateRequest(
                container_requests=[pb.ContainerAllocateRequest(devices_ids=chosen)]
            ),
            timeout=10.0,
        )
        if not reply.container_responses:
            raise RuntimeError(f"no containers return in allocation response {reply}")
        with self._cond:
            allocated.update(chosen)
        response = reply.container_responses[0]
        return Admission(count, tuple(available), preferred, dict(response.envs), response)

    def release(self, resource_name: str, device_ids: list[str] | tuple[str, ...]) -> None:
        with self._cond:
            self._allocated.get(resource_name, set()).difference_update(device_ids)

    # ---- Register ------------------------------------------------------------------------------

    def _register(self, request: pb.RegisterRequest, context: grpc.ServicerContext) -> pb.Empty:
        refusal = self._refusal(request)
        call = RegisterCall(
            request.version, request.endpoint, request.resource_name, request.options, refusal
        )
        with self._cond:
            self.register_calls.append(call)
            self._cond.notify_all()
        if refusal is not None:
            context.abort(grpc.StatusCode.UNKNOWN, refusal)
        channel = grpc.insecure_channel(f"unix://{self.plugin_dir / request.endpoint}")
        try:
            grpc.channel_ready_future(channel).result(timeout=DIAL_TIMEOUT_S)
            stub = pb_grpc.DevicePluginStub(channel)
            options = stub.GetDevicePluginOptions(pb.Empty(), timeout=DIAL_TIMEOUT_S)
        except (grpc.FutureTimeoutError, grpc.RpcError) as error:
            channel.close()
            context.abort(grpc.StatusCode.UNKNOWN, f"failed to dial device plugin: {error}")
        connection = PluginConnection(
            request.resource_name, request.endpoint, request.options, options, channel, stub
        )
        connection.call = stub.ListAndWatch(pb.Empty())
        with self._cond:
            connection.generation = self._manager.generation
            self._current[request.resource_name] = connection
            self.connections.append(connection)
            self._manager.registered(request.resource_name, connection)
        threading.Thread(
            target=self._watch, args=(connection,), daemon=True, name="standin-law"
        ).start()
        return pb.Empty()

    def _refusal(self, request: pb.RegisterRequest) -> str | None:
        if request.version != SUPPORTED_VERSION:
            return (
                f"requested API version {request.version!r} is not supported by kubelet. "
                f"Supported version is {SUPPORTED_VERSION!r}"
            )
        if not is_extended_resource_name(request.resource_name):
            return f"the ResourceName {request.resource_name!r} is invalid"
        if not request.endpoint or "/" in request.endpoint or request.endpoint in (".", ".."):
            return f"endpoint {request.endpoint!r} is not a file name in {self.plugin_dir}"
        with self._cond:
            if self._refuse_remaining > 0:
                self._refuse_remaining -= 1
                return "registration refused by the stand-in (configured to refuse)"
        return None

    def _watch(self, connection: PluginConnection) -> None:
        try:
            for response in connection.call:  # type: ignore[union-attr]
                listed = tuple(
                    ListedDevice(d.ID, d.health, tuple(n.ID for n in d.topology.nodes))
                    for d in response.devices
                )
                with self._cond:
                    connection.lists.append(listed)
                    self._manager.listed(
                        connection.resource_name,
                        [(d.id, d.health) for d in listed],
                        connection.generation,
                    )
                    self._cond.notify_all()
        except grpc.RpcError as error:
            code = error.code().name  # type: ignore[attr-defined]
            connection.stream_error = f"{code}: {error.details()}"  # type: ignore[attr-defined]
        finally:
            with self._cond:
                connection.stream_ended = True
                self._manager.stream_ended(
                    connection.resource_name, connection, connection.generation
                )
                self._cond.notify_all()


def _close(connection: PluginConnection) -> None:
    if connection.call is not None:
        connection.call.cancel()
    connection.channel.close()


class _Registration(pb_grpc.RegistrationServicer):
    def __init__(self, standin: KubeletStandIn) -> None:
        self._standin = standin

    def Register(self, request: pb.RegisterRequest, context: grpc.ServicerContext) -> pb.Empty:
        return self._standin._register(request, context)
