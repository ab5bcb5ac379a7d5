"""NUMA nodes and PCIe roots come from sysfs, not NVML: the real backend reading the tree the mock's
`render-pci-sysfs` writes for each profile, against the root complexes the profile declares."""

from __future__ import annotations

import itertools

import pytest

from device_plugin.topology.build import build_topology
from tests.nvml_mock.conftest import HostPool, OpenReal
from tests.nvml_mock.mock_folder import PROFILES

pytestmark = pytest.mark.nvml_mock
EACH = pytest.mark.parametrize("profile", PROFILES, ids=[f"mock-{p}" for p in PROFILES])


@EACH
def test_each_gpu_is_on_its_root_complex_numa_node(real_on: OpenReal, mock_hosts: HostPool, profile: str) -> None:
    declared = mock_hosts.profile(profile)
    gpus = real_on(profile).gpus()
    assert [gpu.numa_node for gpu in gpus] == [declared.numa_node[gpu.pci_bus_id] for gpu in gpus]


@EACH
def test_each_gpu_hangs_off_its_declared_root_complex(real_on: OpenReal, mock_hosts: HostPool, profile: str) -> None:
    """The tree puts every GPU right under its root bus (no PCIe switch in between), so the path is the
    socket and the root bus, and the root is what DRA publishes as resource.kubernetes.io/pcieRoot."""
    declared = mock_hosts.profile(profile)
    backend = real_on(profile)
    topology = build_topology(backend)
    for gpu in backend.gpus():
        root = declared.root_complex[gpu.pci_bus_id]
        assert backend.pcie_path(gpu.pci_bus_id) == (f"cpu{declared.numa_node[gpu.pci_bus_id]}", root)
        assert topology.pcie_root(gpu.index) == root


@EACH
def test_pairs_share_a_numa_node_exactly_when_they_share_a_root_complex(
    real_on: OpenReal, mock_hosts: HostPool, profile: str
) -> None:
    declared = mock_hosts.profile(profile)
    topology = build_topology(real_on(profile))
    for a, b in itertools.combinations(range(topology.gpu_count), 2):
        assert topology.pair(a, b).same_numa == declared.same_root_complex(a, b), (a, b)


def test_without_the_tree_nothing_is_known_of_numa_or_roots(real_on: OpenReal) -> None:
    backend = real_on("h100", sysfs=False)
    topology = build_topology(backend)
    assert set(topology.numa_nodes) == {None}
    assert {topology.pcie_root(i) for i in range(topology.gpu_count)} == {None}
