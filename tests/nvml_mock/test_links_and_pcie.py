"""NVLink and PCIe on the mock profiles through the real backend, up to the Topology the allocator works on:
links per GPU and their remote type, NVSwitch detection, the `topo -m` label and bandwidth of every pair, and
the PCIe common ancestor of every pair against the profile's root complexes."""

from __future__ import annotations

import itertools

import pytest

from device_plugin.nvml.types import PcieLevel
from device_plugin.topology.build import build_topology
from tests.nvml_mock.conftest import HostPool, OpenReal
from tests.nvml_mock.mock_folder import PROFILES

pytestmark = pytest.mark.nvml_mock

# Every pair of these boards meets through NVSwitch: the label nvidia-smi topo -m prints, and the one-direction
# bandwidth the facts table gives (links x per-link GB/s: A100 12 x 25, H100 18 x 25, Blackwell 18 x 50).
NVSWITCH = [("a100", "NVS12", 300.0), ("h100", "NVS18", 450.0), ("gb200", "NVS18", 900.0), ("gb300", "NVS18", 900.0)]
# No NVLink at all (b200 is NVIDIA's standalone board, the negative control): PCIe decides, PIX 24 GB/s, SYS 8.
PCIE_ONLY = [("b200", 24.0, 8.0), ("l40s", 24.0, 8.0), ("t4", 24.0, None)]
NVSWITCH_REMOTE = "ffffffff:ff:ff.0"  # what the mock names as the far end of every NVSwitch link


@pytest.mark.parametrize(("profile", "label", "gbps"), NVSWITCH, ids=[f"mock-{c[0]}" for c in NVSWITCH])
def test_the_declared_links_are_the_active_ones_and_reach_an_nvswitch(
    real_on: OpenReal, mock_hosts: HostPool, profile: str, label: str, gbps: float
) -> None:
    declared = mock_hosts.profile(profile)
    backend = real_on(profile)
    for gpu in backend.gpus():
        active = [link for link in backend.nvlinks(gpu.index) if link.active]  # the mock lists 18, A100 has 12
        assert [link.link for link in active] == list(range(declared.links_per_gpu))
        assert all(link.remote_is_nvswitch for link in active)


@pytest.mark.parametrize(("profile", "label", "gbps"), NVSWITCH, ids=[f"mock-{c[0]}" for c in NVSWITCH])
def test_an_nvswitch_board_is_one_nvlink_domain_at_full_bandwidth(
    real_on: OpenReal, profile: str, label: str, gbps: float
) -> None:
    topology = build_topology(real_on(profile))
    n = topology.gpu_count
    assert topology.nvswitch_seen and topology.nvlink_domains() == (tuple(range(n)),)
    assert topology.largest_nvlink_group == n
    pairs = {(topology.pair(a, b).label, topology.bandwidth_gbps(a, b)) for a, b in itertools.permutations(range(n), 2)}
    assert pairs == {(label, gbps)}


def test_the_mock_names_no_remote_bus_for_an_nvswitch_link(real_on: OpenReal) -> None:
    """A known mock limit: NVSwitch links report the remote bus id ffffffff:ff:ff.0. The remote device type still
    says NVSwitch, which is what the backend goes by, so detection does not depend on the bus id."""
    links = real_on("h100").nvlinks(0)
    assert {(link.remote_pci_bus_id, link.remote_is_nvswitch) for link in links} == {(NVSWITCH_REMOTE, True)}


@pytest.mark.parametrize(("profile", "pix", "sys"), PCIE_ONLY, ids=[f"mock-{c[0]}" for c in PCIE_ONLY])
def test_a_board_without_nvlink_is_ranked_by_pcie_alone(
    real_on: OpenReal, mock_hosts: HostPool, profile: str, pix: float, sys: float | None
) -> None:
    backend = real_on(profile)
    assert not any(link.active for gpu in backend.gpus() for link in backend.nvlinks(gpu.index))
    topology = build_topology(backend)
    assert not topology.nvlinked and not topology.nvswitch_seen
    declared = mock_hosts.profile(profile)
    for a, b in itertools.combinations(range(topology.gpu_count), 2):
        expected = (PcieLevel.SINGLE_SWITCH, pix) if declared.same_root_complex(a, b) else (PcieLevel.SYSTEM, sys)
        assert (topology.pair(a, b).pcie_level, topology.bandwidth_gbps(a, b)) == expected, (a, b)


@pytest.mark.parametrize("profile", PROFILES, ids=[f"mock-{p}" for p in PROFILES])
def test_the_mock_puts_gpus_of_one_root_complex_under_one_switch_and_others_across_sockets(
    real_on: OpenReal, mock_hosts: HostPool, profile: str
) -> None:
    """How the mock answers nvmlDeviceGetTopologyCommonAncestor: PIX inside a declared root complex, SYS
    between two, never PXB, PHB or NODE (a real HGX board says NODE between GPUs of one socket)."""
    declared = mock_hosts.profile(profile)
    backend = real_on(profile)
    for a, b in itertools.combinations(range(len(declared.gpus)), 2):
        same = declared.same_root_complex(a, b)
        assert backend.pcie_level(a, b) == (PcieLevel.SINGLE_SWITCH if same else PcieLevel.SYSTEM), (a, b)
