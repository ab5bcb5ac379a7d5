"""The whole DRA driver preparing claims: the node runtime with the DRA front-end on fake NVML + health, the
DRA kubelet stand-in, the API stand-in (testbed/dra_node.py).

A claim read from the API is prepared once (the same answer again); a claim on a GPU that turned unhealthy,
or one deleted before we read it, gets a clear error of its own; a plugin restart keeps the prepared claims
without preparing them twice and leaves no stale slice.
"""

from __future__ import annotations

from device_plugin.core.names import OWN_DOMAIN
from testbed.dra_node import DRIVER, NODE, Node, eventually


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
    # Three reads: the first Prepare's, the clean-up's at the restart (still ours), the second Prepare's.
    assert kubelet.prepare(plugin, [claim])["uid-1"] == before and node.claim_reads() == 3
    assert driver.publisher.wait_synced(10.0) and len(node.published()) == 8
    assert kubelet.unprepare(plugin, [claim]) == {"uid-1": ""}


def test_a_claim_deleted_while_the_plugin_was_down_is_unprepared_at_the_restart_and_its_gpu_freed(
    node: Node,
) -> None:
    """The kubelet never unprepares a claim whose pod went while the driver was down: the restart reads the
    checkpointed claims and forgets the one the API server no longer has, so its GPU can be given again."""
    node.start()
    kubelet = node.kubelet()
    plugin = kubelet.wait_for_plugin()
    gone, kept = node.claim("gone", "uid-g", "gpu-2"), node.claim("kept", "uid-k", "gpu-3")
    assert all(not a.error for a in kubelet.prepare(plugin, [gone, kept]).values())
    node.stop()
    del node.api.claims[("ns", "gone")]
    node.start()
    plugin = node.kubelet().wait_for_plugin()
    answers = kubelet.prepare(plugin, [node.claim("next", "uid-n", "gpu-2"), node.claim("rival", "uid-r", "gpu-3")])
    assert answers["uid-n"].error == "" and answers["uid-n"].devices[0].device_name == "gpu-2"
    assert "already prepared for claim ns/kept" in answers["uid-r"].error


def _ranks(node: Node) -> dict[str, int]:
    rank = f"{OWN_DOMAIN}/singleGPURank"
    return {d["name"]: d["attributes"][rank]["int"] for s in node.api.pool(DRIVER, NODE) for d in s["spec"]["devices"]}


def test_the_one_gpu_ranks_follow_the_claims_prepared_and_the_first_free_one_is_the_allocators_choice(
    node: Node,
) -> None:
    """The scheduler gives a one-GPU claim the free GPU of the lowest singleGPURank: after each Prepare and
    Unprepare the driver ranks the free GPUs by the allocator's choices again, the held ones last."""
    driver = node.start()
    assert driver.publisher.wait_synced(10.0)
    static = _ranks(node)
    kubelet = node.kubelet()
    plugin = kubelet.wait_for_plugin()
    first = min(static, key=static.__getitem__)
    claim = node.claim("one", "uid-1", first)
    assert kubelet.prepare(plugin, [claim])["uid-1"].error == ""
    assert eventually(lambda: _ranks(node)[first] == 7)
    assert driver.publisher.wait_synced(10.0)
    ranked = _ranks(node)
    assert sorted(ranked.values()) == list(range(8))
    allocator = node.runtime.inventory.allocator  # type: ignore[union-attr]
    free = [i for i in range(8) if f"gpu-{i}" != first]
    (chosen,) = allocator.allocate(free, [], 1)
    top = min(ranked, key=ranked.__getitem__)
    own, got = allocator.explain(free, [], 1).chosen, allocator.explain(free, [int(top[4:])], 1).chosen
    assert (got.score, got.fragmentation) == (own.score, own.fragmentation), (top, chosen)
    assert kubelet.unprepare(plugin, [claim]) == {"uid-1": ""}
    assert eventually(lambda: _ranks(node) == static)  # nothing held: the inventory's static order again
