"""The daemon on the real backend on the mock, through the kubelet stand-in: the devices and NUMA nodes the
kubelet is told, the sets GetPreferredAllocation picks, and faults written into the running mock reaching
the kubelet (one GPU, and only that one, Unhealthy) and going away after the quiet period."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from device_plugin.core.names import GPU_RESOURCE
from tests.nvml_mock.conftest import HostPool, eventually
from tests.nvml_mock.daemon_node import MockNode, mock_node

pytestmark = pytest.mark.nvml_mock
__all__ = ["mock_node"]  # the fixture


@pytest.mark.parametrize("profile", ["h100", "gb200", "l40s"], ids=lambda p: f"mock-{p}")
def test_the_kubelet_is_told_every_gpu_by_uuid_with_its_numa_node(
    mock_node: Callable[[str], MockNode], mock_hosts: HostPool, profile: str
) -> None:
    declared = mock_hosts.profile(profile)
    listed = mock_node(profile).listed()
    assert {uuid: (d.health, d.numa_nodes) for uuid, d in listed.items()} == {
        gpu.uuid: ("Healthy", (declared.numa_node[gpu.pci_bus_id],)) for gpu in declared.gpus
    }


# Requests in arrival order; each admitted set must sit on one NUMA node (one root complex). On the NVSwitch
# boards every pair has the same NVLink bandwidth, so NUMA decides; on l40s PCIe does (PIX inside a complex).
REQUESTS = [("h100", (4, 4)), ("gb200", (2, 2, 2, 2)), ("l40s", (2, 2, 4)), ("a100", (1, 3, 4))]


@pytest.mark.parametrize(("profile", "sizes"), REQUESTS, ids=[f"mock-{p}-{'-'.join(map(str, s))}" for p, s in REQUESTS])
def test_preferred_allocations_keep_each_request_on_one_numa_node(
    mock_node: Callable[[str], MockNode], mock_hosts: HostPool, profile: str, sizes: tuple[int, ...]
) -> None:
    declared = mock_hosts.profile(profile)
    numa = {gpu.uuid: declared.numa_node[gpu.pci_bus_id] for gpu in declared.gpus}
    node = mock_node(profile)
    given: set[str] = set()
    for size in sizes:
        preferred = node.kubelet.admit(GPU_RESOURCE, size).preferred
        assert len(preferred) == size and not given & set(preferred)
        assert len({numa[uuid] for uuid in preferred}) == 1, f"{size} GPUs across NUMA nodes: {preferred}"
        given |= set(preferred)


def test_a_lost_gpu_with_xid_79_is_unhealthy_alone_and_recovers_after_the_quiet_period(
    mock_node: Callable[[str], MockNode],
) -> None:
    node = mock_node("h100")
    lost = node.backend.gpus()[2].uuid
    node.host.inject({2: {"failure": {"mode": "lost", "xid": {"code": 79}}}})
    eventually(lambda: node.health_of(lost) == "Unhealthy", "GPU 2 is still Healthy")
    node.host.clear()
    eventually(lambda: node.health_of(lost) == "Healthy", "GPU 2 does not recover")
    others = {d.health for devices in node.every_list() for d in devices if d.id != lost}
    assert others == {"Healthy"}, "a GPU other than the lost one went Unhealthy"


def test_ecc_uncorrectable_errors_take_the_gpu_out_until_cleared(mock_node: Callable[[str], MockNode]) -> None:
    node = mock_node("a100")
    uuids = [gpu.uuid for gpu in node.backend.gpus()]
    node.host.inject({5: {"failure": {"mode": "ecc_uncorrectable", "xid": {"code": 48}}}})
    eventually(lambda: node.health_of(uuids[5]) == "Unhealthy", "GPU 5 is still Healthy")
    assert [node.health_of(uuid) for uuid in uuids] == ["Unhealthy" if i == 5 else "Healthy" for i in range(8)]
    node.host.clear()
    eventually(lambda: node.health_of(uuids[5]) == "Healthy", "GPU 5 does not recover")
