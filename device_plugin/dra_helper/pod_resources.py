"""The kubelet's pod-resources API (v1 List), read for both modes: which container holds which
devices.

Boundary: one synchronous List over `<kubelet root>/pod-resources/kubelet.sock`, its answer as
frozen values. GPU-blind: which devices are GPUs, and whose, is the caller's (node/pod_gpus.py).
Every failure (no socket, a refused or slow List) is a PodResourcesError naming the socket and why;
nothing else is raised.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import grpc

from api import podresources_v1_pb2 as pb
from api import podresources_v1_pb2_grpc as pb_grpc

POD_RESOURCES_SOCKET = Path("pod-resources") / "kubelet.sock"  # under the kubelet's root directory
# a node of 250 pods with many devices each stays far under this
MAX_ANSWER_BYTES = 16 * 1024 * 1024


class PodResourcesError(RuntimeError):
    """The List failed; the message names the socket and the reason."""


@dataclass(frozen=True)
class ContainerDevice:
    namespace: str
    pod: str
    container: str
    source: str  # the device plugin's resource name, or the DRA driver's name
    device: str  # the device plugin's device ID, or the DRA device name
    cdi_devices: tuple[str, ...] = ()  # DRA: the CDI device names the driver answered
    share_id: str = ""  # DRA: the share of the device the claim holds (consumable capacity)


def list_container_devices(socket: Path, timeout_s: float = 1.0) -> list[ContainerDevice]:
    """Every device of every container on the node, as the kubelet tells it now."""
    if not socket.is_socket():
        raise PodResourcesError(
            f"{socket}: no socket there (is the kubelet's pod-resources folder mounted?)"
        )
    options = [("grpc.max_receive_message_length", MAX_ANSWER_BYTES)]
    try:
        with grpc.insecure_channel(f"unix://{socket}", options=options) as channel:
            answer = pb_grpc.PodResourcesListerStub(channel).List(
                pb.ListPodResourcesRequest(), timeout=timeout_s
            )
    except grpc.RpcError as error:
        code = error.code() if isinstance(error, grpc.Call) else None
        details = error.details() if isinstance(error, grpc.Call) else str(error)
        raise PodResourcesError(
            f"{socket}: List failed: {code.name if code else 'error'}: {details}"
        ) from None
    out = []
    for pod in answer.pod_resources:
        for container in pod.containers:
            where = (pod.namespace, pod.name, container.name)
            for devices in container.devices:
                out += [
                    ContainerDevice(*where, devices.resource_name, d) for d in devices.device_ids
                ]
            for claim in container.dynamic_resources:
                out += [
                    ContainerDevice(
                        *where,
                        r.driver_name,
                        r.device_name,
                        tuple(c.name for c in r.cdi_devices),
                        r.share_id,
                    )
                    for r in claim.claim_resources
                ]
    return out
