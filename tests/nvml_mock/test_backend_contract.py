"""The NvmlBackend contract of tests/nvml/test_contract.py and tests/mig/test_mig_contract.py, run on the real
backend (RealNvml over pynvml) on every NVML mock profile, with the sysfs tree the mock renders (so NUMA nodes
are known and the "never closer across NUMA nodes" rule has something to check).

The contract tests are the shared ones, collected here a second time with `backend` bound to the mock; the one
that only applies to a described machine (socket membership of a fake) is left out. Where the mock cannot
answer as a GPU would (MIG devices), test_fabric_and_mig.py states what it answers instead.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from device_plugin.nvml.protocol import NvmlBackend
from tests.mig.test_mig_contract import (
    test_mig_devices_belong_to_their_parent_and_do_not_overlap,
    test_strategies_never_advertise_a_device_twice,
    test_tree_renders,
)
from tests.nvml.test_contract import (
    test_close_is_idempotent,
    test_device_minors_are_distinct_non_negative_numbers,
    test_direct_links_are_reported_from_both_ends,
    test_fabric_info_for_every_gpu_and_attached_means_a_cluster,
    test_indices_are_contiguous_from_zero,
    test_nvlinks_are_numbered_and_reach_a_gpu_or_a_switch,
    test_pcie_level_is_symmetric_and_never_closer_across_numa_nodes,
    test_pcie_level_with_itself_is_refused,
    test_system_info_is_filled,
    test_uuids_and_bus_ids_are_unique_and_well_formed,
)
from tests.nvml_mock.conftest import HostPool
from tests.nvml_mock.mock_folder import PROFILES

pytestmark = pytest.mark.nvml_mock

__all__ = [  # the shared contract tests collected here (ruff: these imports are used)
    "test_close_is_idempotent",
    "test_device_minors_are_distinct_non_negative_numbers",
    "test_direct_links_are_reported_from_both_ends",
    "test_fabric_info_for_every_gpu_and_attached_means_a_cluster",
    "test_indices_are_contiguous_from_zero",
    "test_mig_devices_belong_to_their_parent_and_do_not_overlap",
    "test_nvlinks_are_numbered_and_reach_a_gpu_or_a_switch",
    "test_pcie_level_is_symmetric_and_never_closer_across_numa_nodes",
    "test_pcie_level_with_itself_is_refused",
    "test_strategies_never_advertise_a_device_twice",
    "test_system_info_is_filled",
    "test_tree_renders",
    "test_uuids_and_bus_ids_are_unique_and_well_formed",
]


@pytest.fixture(params=PROFILES, ids=[f"mock-{profile}" for profile in PROFILES])
def backend(request: pytest.FixtureRequest, mock_hosts: HostPool) -> Iterator[NvmlBackend]:
    opened = mock_hosts.host(request.param).open_backend(mock_hosts.sysfs(request.param))
    yield opened
    opened.close()


def test_numa_nodes_are_known_so_the_numa_rule_has_teeth(backend: NvmlBackend) -> None:
    """The sysfs tree is read: without it every NUMA node is None and the rule above checks nothing."""
    assert all(gpu.numa_node is not None for gpu in backend.gpus())
