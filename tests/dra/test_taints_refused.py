"""An API server that refuses the taints field with 400 (issue 30 item 11): the driver falls back to leaving
the sick GPU out of the pool, says so once, remembers it, and /readyz stays green with a note.

Before, the same body went out again with backoff forever, and the faulty GPU stayed published as it was.
"""

from __future__ import annotations

import logging

import pytest

from testbed.dra_node import DRIVER, NODE, Node, eventually
from testbed.scheduler_view import taints_of

FALLBACK = "leaving unhealthy devices out of the pool"


def _refused_writes(node: Node) -> int:
    return sum(1 for m, p in node.api.requests if m in ("POST", "PUT") and "resourceslices" in p)


def test_a_400_on_taints_leaves_the_sick_gpus_out_logged_once_remembered_with_readyz_green_and_a_note(
    node: Node, caplog: pytest.LogCaptureFixture
) -> None:
    node.api.refuses_taints = True
    driver = node.start()
    node.kubelet().wait_for_plugin()
    assert eventually(lambda: driver.readiness().ok) and len(node.listed()) == 8
    assert driver.readiness().detail == "registered; pool generation 1"  # no note before any taint was sent
    with caplog.at_level(logging.INFO):
        node.fake.test_hooks.set_lost(3, "test")
        assert eventually(lambda: len(node.listed()) == 7 and "gpu-3" not in node.listed())
        node.fake.test_hooks.set_lost(5, "test")  # a second fault: the fallback is remembered, not rediscovered
        assert eventually(lambda: len(node.listed()) == 6 and "gpu-5" not in node.listed())
        assert driver.publisher.wait_synced(10.0)
    assert taints_of(node.api.pool(DRIVER, NODE)) == {}
    probe = driver.readiness()
    assert probe.ok and "refused" in probe.detail and FALLBACK in probe.detail, probe.detail
    warnings = [r for r in caplog.records if "refused the device taints" in r.getMessage()]
    assert len(warnings) == 1 and warnings[0].levelno == logging.WARNING, [r.getMessage() for r in warnings]
    assert "HTTP 400" in warnings[0].getMessage()
    refused = _refused_writes(node)
    driver.publisher.resync()  # settled: nothing is sent again, with or without taints
    assert driver.publisher.wait_synced(10.0) and _refused_writes(node) == refused
