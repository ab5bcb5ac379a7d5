"""The DRA kubelet side over real unix sockets: registration, prepare/unprepare, checkpoint, restarts, errors."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from device_plugin.config.schema import DEFAULT_DRA_DRIVER_NAME
from device_plugin.dra.inventory import build_devices
from device_plugin.dra.prepare_decision import PrepareDecision
from device_plugin.dra_helper.checkpoint.store import Checkpoint
from device_plugin.dra_helper.claims.prepare import Preparer
from device_plugin.dra_helper.service.grpc_service import DraGrpcServer
from device_plugin.dra_helper.service.socket_paths import SocketPaths
from device_plugin.nvml.fake.machine import FakeNvml
from device_plugin.standins.api_objects import allocated_claim
from device_plugin.standins.kubelet_dra import DraKubeletStandin
from tests.allocation.machines import topology_of

DRIVER, NODE = DEFAULT_DRA_DRIVER_NAME, "node-a"  # the default driver name
DGX1 = {d.name: d.uuid for d in build_devices(FakeNvml.from_machine("dgx1-v100"), topology_of("dgx1-v100"))[0]}


def node_decision() -> PrepareDecision:
    """The prepare decision over the dgx1-v100's devices, all healthy."""
    decision = PrepareDecision(driver_name=DRIVER, pool_name=NODE)
    decision.see(DGX1, frozenset(), {})
    return decision


@dataclass
class ClaimStore:
    """ResourceClaims by (namespace, name), counting reads; `fail` makes the next reads raise."""

    claims: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)
    reads: int = 0
    fail: str = ""

    async def fetch_claim(self, namespace: str, name: str) -> Mapping[str, Any] | None:
        self.reads += 1
        if self.fail:
            raise ConnectionError(self.fail)
        return self.claims.get((namespace, name))

    def add(self, name: str, uid: str, results: list[tuple[str, str, str, str]]) -> tuple[str, str, str]:
        allocation = [{"request": r, "driver": d, "pool": p, "device": dev} for r, d, p, dev in results]
        self.claims[("ns", name)] = allocated_claim("ns", name, uid, allocation)
        return ("ns", uid, name)


@dataclass
class Driver:
    root: Path
    store: ClaimStore
    decision: PrepareDecision
    server: DraGrpcServer | None = None
    preparer: Preparer | None = None
    checkpoint: Checkpoint | None = None  # the running driver's

    @property
    def checkpoint_path(self) -> Path:
        return self.root / "plugins" / DRIVER / "checkpoint.json"

    def checkpointed(self) -> tuple[str, ...]:
        """The claim UIDs on disk, as a restarted driver would read them, once the running driver's background
        compaction (if any) is over: a second reader of the folder meanwhile could see a journal go."""
        if self.checkpoint is not None:
            assert self.checkpoint.settle(10.0)
        return Checkpoint(self.checkpoint_path).uids()

    def start(self) -> None:
        paths = SocketPaths.for_driver(DRIVER, self.root)
        self.checkpoint = Checkpoint(self.checkpoint_path)
        preparer = Preparer(driver_name=DRIVER, fetcher=self.store, driver=self.decision, checkpoint=self.checkpoint)
        self.preparer = preparer
        self.server = DraGrpcServer(DRIVER, paths, preparer)
        self.server.start()

    def stop(self) -> None:
        if self.server is not None:
            self.server.stop(0.1)
            self.server = None


@pytest.fixture
def driver() -> Iterator[Driver]:
    root = Path(tempfile.mkdtemp(prefix="dra-", dir="/tmp"))  # short: unix socket paths max 107 bytes
    d = Driver(root, ClaimStore(), node_decision())
    d.start()
    yield d
    d.stop()
    shutil.rmtree(root, ignore_errors=True)


def kubelet(driver: Driver, *versions: str) -> DraKubeletStandin:
    return DraKubeletStandin(driver.root / "plugins_registry", *((versions,) if versions else ()))


def test_registration_names_type_driver_endpoint_and_every_served_version(driver: Driver) -> None:
    plugin = kubelet(driver).wait_for_plugin()
    assert (plugin.name, plugin.endpoint, plugin.version) == (
        DRIVER,
        str(driver.root / "plugins" / DRIVER / "dra.sock"),
        "v1.DRAPlugin",
    )
    assert driver.server is not None and driver.server.registration.status == (True, "")


def test_a_kubelet_that_knows_only_v1beta1_uses_it(driver: Driver) -> None:
    k = kubelet(driver, "v1beta1.DRAPlugin")
    plugin = k.wait_for_plugin()
    claim = driver.store.add("c", "uid-1", [("gpus", DRIVER, NODE, "gpu-0")])
    assert plugin.version == "v1beta1.DRAPlugin"
    assert list(k.prepare(plugin, [claim])["uid-1"].devices[0].cdi_device_ids) == [f"nvidia.com/gpu={DGX1['gpu-0']}"]


def test_a_kubelet_without_a_common_version_refuses_and_the_driver_hears_why(driver: Driver) -> None:
    with pytest.raises(RuntimeError, match="none of the versions"):
        kubelet(driver, "v1alpha4.DRAPlugin").wait_for_plugin()
    assert driver.server is not None and driver.server.registration.status is not None
    assert driver.server.registration.status[0] is False


def test_prepare_answers_cdi_ids_of_this_drivers_devices_only_and_is_idempotent(driver: Driver) -> None:
    k = kubelet(driver)
    plugin = k.wait_for_plugin()
    claim = driver.store.add(
        "c",
        "uid-1",
        [("a", DRIVER, NODE, "gpu-0"), ("a", DRIVER, NODE, "gpu-3"), ("nic", "nic.example.com", NODE, "eth0")],
    )
    first = k.prepare(plugin, [claim])["uid-1"]
    assert first.error == ""
    assert [(list(d.request_names), d.device_name, list(d.cdi_device_ids)) for d in first.devices] == [
        (["a"], "gpu-0", [f"nvidia.com/gpu={DGX1['gpu-0']}"]),
        (["a"], "gpu-3", [f"nvidia.com/gpu={DGX1['gpu-3']}"]),
    ]
    second = k.prepare(plugin, [claim])["uid-1"]
    assert second == first and driver.store.reads == 2  # re-read: the allocation is unchanged


def test_a_restarted_driver_neither_loses_nor_repeats_prepared_claims(driver: Driver) -> None:
    k = kubelet(driver)
    claim = driver.store.add("c", "uid-1", [("a", DRIVER, NODE, "gpu-1")])
    before = k.prepare(k.wait_for_plugin(), [claim])["uid-1"]
    driver.stop()
    del driver.store.claims[("ns", "c")]  # even a claim gone from the API is answered from the checkpoint
    driver.start()
    k2 = kubelet(driver)  # and a restarted kubelet registers again
    plugin = k2.wait_for_plugin()
    assert k2.prepare(plugin, [claim])["uid-1"] == before and driver.store.reads == 2
    assert k2.unprepare(plugin, [claim]) == {"uid-1": ""}
    assert driver.checkpointed() == ()


def test_unprepare_of_an_unknown_claim_succeeds(driver: Driver) -> None:
    k = kubelet(driver)
    assert k.unprepare(k.wait_for_plugin(), [("ns", "never", "x")]) == {"never": ""}


CASES = {
    "unknown-device": ([("a", DRIVER, NODE, "gpu-99")], "", "device gpu-99 is unknown"),
    "unhealthy-device": ([("a", DRIVER, NODE, "gpu-2")], "", "device gpu-2 is unhealthy"),
    "foreign-pool": ([("a", DRIVER, "node-b", "gpu-0")], "", "belongs to pool 'node-b'"),
    "other-driver-only": ([("a", "x.example.com", NODE, "gpu-0")], "", "no device of driver"),
    "api-down": ([("a", DRIVER, NODE, "gpu-0")], "connection refused", "cannot read the ResourceClaim"),
}


@pytest.mark.parametrize("case", sorted(CASES), ids=sorted(CASES))
def test_a_bad_claim_gets_its_own_error_naming_the_problem_and_is_not_checkpointed(driver: Driver, case: str) -> None:
    results, fail, expected = CASES[case]
    driver.decision.see(DGX1, frozenset({"gpu-2"}), {})
    k = kubelet(driver)
    plugin = k.wait_for_plugin()
    bad = driver.store.add("bad", "uid-bad", results)
    good = driver.store.add("good", "uid-good", [("a", DRIVER, NODE, "gpu-5")])
    driver.store.fail = fail
    answers = k.prepare(plugin, [bad, good])
    assert expected in answers["uid-bad"].error and "ns/bad" in answers["uid-bad"].error
    assert not answers["uid-bad"].devices
    if not fail:
        assert answers["uid-good"].error == "" and answers["uid-good"].devices
    assert "uid-bad" not in driver.checkpointed()


@pytest.mark.parametrize(
    ("mutate", "expected"),
    [
        (lambda s: s.claims.clear(), "does not exist"),
        (lambda s: s.claims[("ns", "c")]["metadata"].update(uid="new"), "now has UID new"),
    ],
    ids=["deleted-before-our-read", "deleted-and-recreated"],
)
def test_a_claim_deleted_between_the_kubelets_call_and_our_read_is_a_clear_error(
    driver: Driver, mutate, expected: str
) -> None:
    k = kubelet(driver)
    plugin = k.wait_for_plugin()
    claim = driver.store.add("c", "uid-1", [("a", DRIVER, NODE, "gpu-0")])
    mutate(driver.store)
    assert expected in k.prepare(plugin, [claim])["uid-1"].error


def test_a_firstavailable_result_answers_the_base_request_name(driver: Driver) -> None:
    """A firstAvailable result names "<request>/<subrequest>"; containers reference "<request>", and the
    kubelet matches a container's claim request against request_names, so we answer the base name."""
    k = kubelet(driver)
    claim = driver.store.add(
        "c", "uid-1", [("gpus/best4", DRIVER, NODE, "gpu-0"), ("gpus/best4", DRIVER, NODE, "gpu-1")]
    )
    answer = k.prepare(k.wait_for_plugin(), [claim])["uid-1"]
    assert answer.error == ""
    assert [(list(d.request_names), d.device_name) for d in answer.devices] == [
        (["gpus"], "gpu-0"),
        (["gpus"], "gpu-1"),
    ]
