"""The whole DRA driver preparing claims: the node runtime with the DRA front-end on fake NVML + health, the
DRA kubelet stand-in, the API stand-in (tests/dra/driver_node.py).

A claim read from the API is prepared once (the same answer again); a claim on a GPU that turned unhealthy,
or one deleted before we read it, gets a clear error of its own; a plugin restart keeps the prepared claims
without preparing them twice and leaves no stale slice.
"""

from __future__ import annotations

from tests.dra.driver_node import DRIVER, NODE, Node, eventually


def test_start_publishes_the_pool_registers_and_prepares_a_claim_read_from_the_api(node: Node) -> None:
    driver = node.start()
    assert driver.publisher.wait_synced(10.0) and len(node.published()) == 8
    kubelet = node.kubelet()
    plugin = kubelet.wait_for_plugin()
    claim = node.claim("train", "uid-1", "gpu-0", "gpu-1")
    answer = kubelet.prepare(plugin, [claim])["uid-1"]
    assert answer.error == "" and [d.device_name for d in answer.devices] == ["gpu-0", "gpu-1"]
    # idempotent: the same answer, after a read that shows the allocation unchanged
    assert kubelet.prepare(plugin, [claim])["uid-1"] == answer and node.claim_reads() == 2


def test_a_claim_on_a_gpu_that_turned_unhealthy_gets_an_error_naming_it(node: Node) -> None:
    driver = node.start()
    kubelet = node.kubelet()
    plugin = kubelet.wait_for_plugin()
    node.fake.test_hooks.set_lost(5, "test")
    assert eventually(lambda: "gpu-5" in driver.unhealthy())
    error = kubelet.prepare(plugin, [node.claim("c", "uid-5", "gpu-5")])["uid-5"].error
    assert "device gpu-5 is unhealthy" in error and "ns/c" in error


def test_a_claim_deleted_between_the_kubelets_call_and_our_read_is_a_clear_per_claim_error(node: Node) -> None:
    node.start()
    kubelet = node.kubelet()
    plugin = kubelet.wait_for_plugin()
    gone = node.claim("gone", "uid-g", "gpu-0")
    ok = node.claim("ok", "uid-ok", "gpu-1")
    del node.api.claims[("ns", "gone")]
    answers = kubelet.prepare(plugin, [gone, ok])
    assert "ns/gone (uid-g): the ResourceClaim does not exist" in answers["uid-g"].error
    assert answers["uid-ok"].error == "" and answers["uid-ok"].devices


def test_a_plugin_restart_keeps_prepared_claims_without_preparing_them_twice(node: Node) -> None:
    node.start()
    kubelet = node.kubelet()
    claim = node.claim("c", "uid-1", "gpu-2")
    before = kubelet.prepare(kubelet.wait_for_plugin(), [claim])["uid-1"]
    node.stop()
    assert node.api.pool(DRIVER, NODE) == []  # clean shutdown: no stale slice
    driver = node.start()
    plugin = node.kubelet().wait_for_plugin()
    assert kubelet.prepare(plugin, [claim])["uid-1"] == before and node.claim_reads() == 2
    assert driver.publisher.wait_synced(10.0) and len(node.published()) == 8
    assert kubelet.unprepare(plugin, [claim]) == {"uid-1": ""}
