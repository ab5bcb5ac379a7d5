"""DRA mode on the real backend on the mock: the node runtime with the DRA front-end publishing ResourceSlices to
the API server stand-in (every write checked against the Kubernetes schema), from what NVML and the rendered
sysfs tree say: UUIDs, model, PCI address, pcieRoot and NUMA node per GPU, the gb200 clique, and a lost GPU
leaving the pool and coming back."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from device_plugin.config.loader import load_config
from device_plugin.core.names import OWN_DOMAIN
from device_plugin.dra.front_end import DraFrontEnd
from device_plugin.dra_helper.api.kube import api_client
from device_plugin.node.runtime import NodeRuntime
from testbed.api_standin import ApiStandin
from testbed.dra_node import DRIVER, NODE
from testbed.scheduler_view import newest_devices, schedulable
from tests.nvml_mock.conftest import HostPool, eventually
from tests.nvml_mock.daemon_node import FAST_HEALTH
from tests.nvml_mock.remote import MockHost, RemoteBackend

pytestmark = pytest.mark.nvml_mock
STANDARD = "resource.kubernetes.io/"


class DraNode:
    """The DRA driver's runtime over `backend`, publishing to `api`; sockets under a short temporary root."""

    def __init__(self, backend: RemoteBackend, api: ApiStandin) -> None:
        self.api = api
        self.host = backend.host  # faults are written there
        self.root = Path(tempfile.mkdtemp(prefix="dra-m-", dir="/tmp"))  # unix socket paths: 107 bytes at most
        loaded = load_config(env={"METRICS_ADDRESS": ""})
        daemon = replace(
            loaded.daemon, device_plugin_dir=self.root / "device-plugins", health=FAST_HEALTH, rescan_interval_s=3600.0
        )
        config = replace(loaded, daemon=daemon)
        front_end = DraFrontEnd.for_config(config, api_client(api.host), node_name=NODE, backoff_max_s=0.2)
        self.front_end = front_end
        self.runtime = NodeRuntime(backend, config, front_end, load_config=lambda: config)
        self.runtime.start()

    def devices(self) -> dict[str, dict[str, Any]]:
        """Published device name -> its attributes, values unwrapped ({"string": "x"} -> "x")."""
        return {
            d["name"]: {name: next(iter(value.values())) for name, value in d["attributes"].items()}
            for d in newest_devices(self.api.pool(DRIVER, NODE))
        }

    def stop(self) -> None:
        self.runtime.stop()
        shutil.rmtree(self.root, ignore_errors=True)


@pytest.fixture
def dra_on(mock_hosts: HostPool, own_host: Callable[[str], MockHost]) -> Iterator[Callable[[str], DraNode]]:
    """dra_on(profile): the DRA driver on the real backend on the profile (its own host), with its API server."""
    started: list[tuple[DraNode, ApiStandin]] = []

    def start(profile: str) -> DraNode:
        api = ApiStandin().up()
        api.add_node(NODE)
        node = DraNode(own_host(profile).open_backend(mock_hosts.sysfs(profile)), api)
        started.append((node, api))
        assert node.front_end.publisher.wait_synced(15.0), "the slices were never published"
        return node

    yield start
    for node, api in started:
        node.stop()
        api.down()
        assert api.invalid == [], "a write the Kubernetes schema refuses"


@pytest.mark.parametrize("profile", ["h100", "gb200", "l40s"], ids=lambda p: f"mock-{p}")
def test_every_gpu_is_published_with_what_nvml_and_sysfs_say(
    dra_on: Callable[[str], DraNode], mock_hosts: HostPool, profile: str
) -> None:
    declared = mock_hosts.profile(profile)
    published = dra_on(profile).devices()
    assert sorted(published) == sorted(f"gpu-{gpu.index}" for gpu in declared.gpus)
    for gpu in declared.gpus:
        attributes = published[f"gpu-{gpu.index}"]
        assert (attributes["uuid"], attributes["productName"], attributes[STANDARD + "pciBusID"]) == (
            gpu.uuid,
            declared.model,
            gpu.pci_bus_id,
        )
        assert attributes[STANDARD + "pcieRoot"] == declared.root_complex[gpu.pci_bus_id]
        assert attributes[STANDARD + "numaNode"] == declared.numa_node[gpu.pci_bus_id]


def test_gb200_gpus_carry_their_nvlink_clique(dra_on: Callable[[str], DraNode]) -> None:
    published = dra_on("gb200").devices()
    assert {attributes[f"{OWN_DOMAIN}/clique"] for attributes in published.values()} == {
        "00000000-0000-0000-0000-000000000001.0"
    }


def test_a_board_without_a_fabric_publishes_no_clique(dra_on: Callable[[str], DraNode]) -> None:
    assert not any(f"{OWN_DOMAIN}/clique" in attributes for attributes in dra_on("l40s").devices().values())


def test_a_lost_gpu_leaves_the_pool_and_returns_when_cleared(dra_on: Callable[[str], DraNode]) -> None:
    node = dra_on("h100")
    node.host.inject({4: {"failure": {"mode": "lost"}}})
    eventually(lambda: "gpu-4" not in schedulable(node.api.pool(DRIVER, NODE)), "gpu-4 stays allocatable")
    assert len(schedulable(node.api.pool(DRIVER, NODE))) == 7
    node.host.clear()
    eventually(lambda: len(schedulable(node.api.pool(DRIVER, NODE))) == 8, "gpu-4 does not come back")
