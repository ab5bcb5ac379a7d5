"""NVLink fabric and MIG through the real backend on the mock: the fabric registration each profile declares,
the nvidia.com/gpu.clique label it gives (gb200), a registration still in progress, and what the mock answers
where it cannot play a GPU (MIG devices: never any; MIG mode on boards that have none)."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from device_plugin.mig.discovery import discover
from device_plugin.mig.strategy import build_resources
from device_plugin.nvml.fabric_types import NO_FABRIC, FabricInfo, FabricState
from device_plugin.nvml.mig_types import MigMode
from device_plugin.observability.labels import compute_labels
from device_plugin.topology.build import build_topology
from tests.nvml_mock.conftest import HostPool, OpenReal, eventually
from tests.nvml_mock.mock_folder import PROFILES
from tests.nvml_mock.remote import MockHost, RemoteBackend

pytestmark = pytest.mark.nvml_mock
CLIQUE = "nvidia.com/gpu.clique"
EACH = pytest.mark.parametrize("profile", PROFILES, ids=[f"mock-{p}" for p in PROFILES])


@EACH
def test_fabric_info_is_the_declared_registration(real_on: OpenReal, mock_hosts: HostPool, profile: str) -> None:
    fabric = mock_hosts.profile(profile).fabric
    backend = real_on(profile)
    expected = (
        NO_FABRIC if fabric is None else FabricInfo(FabricState.COMPLETED, fabric["cluster_uuid"], fabric["clique_id"])
    )
    assert {backend.fabric_info(gpu.index) for gpu in backend.gpus()} == {expected}


def test_gb200_is_labelled_with_its_clique_and_its_gpus_carry_it(real_on: OpenReal) -> None:
    backend = real_on("gb200")
    assert compute_labels(backend)[CLIQUE] == "00000000-0000-0000-0000-000000000001.0"
    topology = build_topology(backend)
    assert {topology.gpu_clique(i) for i in range(topology.gpu_count)} == {"00000000-0000-0000-0000-000000000001.0"}


@pytest.mark.parametrize("profile", ["a100", "l40s"], ids=["mock-a100", "mock-l40s"])
def test_a_board_without_a_fabric_gets_no_clique_label(real_on: OpenReal, profile: str) -> None:
    assert CLIQUE not in compute_labels(real_on(profile))


def test_a_registration_in_progress_takes_the_label_away_until_it_completes(
    own_host: Callable[[str], MockHost],
) -> None:
    host = own_host("gb200")
    backend = host.open_backend()
    host.inject({i: {"fabric": {"state": "in_progress"}} for i in range(8)})
    eventually(lambda: backend.fabric_info(0).state is FabricState.IN_PROGRESS, "the fabric stays completed")
    assert CLIQUE not in compute_labels(backend)
    host.clear()
    eventually(lambda: CLIQUE in compute_labels(backend), "the label does not come back")


@pytest.mark.parametrize("profile", ["a100", "h100", "b200", "gb200", "gb300"], ids=lambda p: f"mock-{p}")
def test_mig_capable_boards_report_mig_off(real_on: OpenReal, profile: str) -> None:
    backend = real_on(profile)
    assert {backend.mig_mode(gpu.index) for gpu in backend.gpus()} == {MigMode(current=False, pending=False)}


@pytest.mark.parametrize("profile", ["l40s", "t4"], ids=lambda p: f"mock-{p}")
def test_mock_limit_boards_without_mig_still_report_mig_off(real_on: OpenReal, profile: str) -> None:
    """The mock answers nvmlDeviceGetMigMode on every board; a T4 or L40S driver says NOT_SUPPORTED, which the
    backend reports as None (cannot do MIG). Both mean: serve the GPUs whole."""
    backend = real_on(profile)
    assert {backend.mig_mode(gpu.index) for gpu in backend.gpus()} == {MigMode(current=False, pending=False)}


def test_mock_limit_mig_mode_on_lists_no_mig_devices(own_host: Callable[[str], MockHost]) -> None:
    """The mock never lists a MIG device: with MIG mode on, every slot answers NOT_FOUND. So MIG discovery and
    the MIG strategies are tested on the fake machines (tests/mig), and here only what this answer makes of a
    node: under `mixed` the GPU with MIG on serves nothing and the other seven are served whole."""
    host = own_host("a100")
    backend: RemoteBackend = host.open_backend()
    host.inject({1: {"mig": {"mode_current": "enabled", "mode_pending": "enabled"}}})
    eventually(lambda: backend.mig_mode(1) == MigMode(current=True, pending=True), "MIG mode stays off")
    assert backend.mig_devices(1) == ()
    inventory = discover(backend)
    served = build_resources(inventory.gpus, inventory.devices_by_gpu, "mixed")
    assert {name: sorted(d.gpu_indices[0] for d in devices) for name, devices in served.items()} == {
        "nvidia.com/gpu": [0, 2, 3, 4, 5, 6, 7]
    }
