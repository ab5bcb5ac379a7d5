"""The runtime both modes share (node/) names nothing of one mode: the device plugin's request path stays in
kubelet/ (its composition), the DRA driver's in dra/ and dra_helper/ (node/ never names a front-end:
the layering test's direction rule already keeps it below them)."""

from __future__ import annotations

from tests.layering_rules import matches
from tests.test_layering import CODE, SOURCE

# The device plugin's request path: node/ is the runtime both modes share, so it names none of it (the
# device-plugin front-end composes its resources in dp/composition.py).
DEVICE_PLUGIN_ONLY = (
    "device_plugin.allocation",
    "device_plugin.timeslice",
    "device_plugin.mig.policy",
    "device_plugin.mig.strategy",
)


def test_the_shared_runtime_imports_nothing_only_the_device_plugin_uses() -> None:
    node = [m for m in CODE if matches(m, "device_plugin.node")]
    assert len(node) >= 5, node
    found = {m: sorted(t for t in SOURCE.edges[m] if any(matches(t, p) for p in DEVICE_PLUGIN_ONLY)) for m in node}
    assert {m: t for m, t in found.items() if t} == {}
    assert any(matches(t, "device_plugin.allocation") for t in SOURCE.edges["device_plugin.dp.composition"])
