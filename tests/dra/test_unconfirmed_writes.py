"""A slice write the API server answers with 200 but does not store is noticed, retried and shown by /readyz.

Issue 30 item 10: the publisher took every 200 as stored, so /readyz said "pool generation 2" while the
server still held generation 1 without the sick GPU's taint. Now a write is checked against its answer
(a new resourceVersion, the spec written) and the pool is read back once written; what is not confirmed
stays in /readyz (503) and is retried with backoff until the server holds it.
"""

from __future__ import annotations

import pytest

from testbed.dra_node import DRIVER, NODE, Node, eventually
from testbed.scheduler_view import taints_of

# How the stand-in answers a PUT it does not store.
LOST = {
    "answered-with-the-old-object": "old",
    "answered-with-what-was-sent": "echo",
}


def _generations(node: Node) -> set[int]:
    return {s["spec"]["pool"]["generation"] for s in node.api.pool(DRIVER, NODE)}


@pytest.mark.parametrize("mode", LOST.values(), ids=LOST.keys())
def test_a_write_answered_but_not_stored_keeps_readyz_red_naming_it_until_the_server_holds_it(
    node: Node, mode: str
) -> None:
    driver = node.start()
    node.kubelet().wait_for_plugin()
    assert eventually(lambda: driver.readiness().ok)
    assert driver.readiness().detail == "registered; pool generation 1" and _generations(node) == {1}
    node.api.writes_lost = mode
    node.fake.test_hooks.set_lost(3, "test")
    assert eventually(lambda: "generation 2" in driver.readiness().detail)
    probe = driver.readiness()
    assert not probe.ok and "not confirmed" in probe.detail, probe.detail
    # What the server holds: still generation 1, the sick GPU untainted; readiness never claimed otherwise.
    assert _generations(node) == {1} and taints_of(node.api.pool(DRIVER, NODE)) == {}
    assert not driver.publisher.wait_synced(0.0) and driver.publisher.generation == 1
    node.api.writes_lost = ""  # the server stores writes again: the retry (with backoff) gets through
    assert eventually(lambda: driver.readiness().ok)
    assert "gpu-3" in taints_of(node.api.pool(DRIVER, NODE))
    (held,) = _generations(node)
    assert held >= 2 and driver.readiness().detail == f"registered; pool generation {held}"
