"""The device-plugin helper (dp_helper/) knows no GPU, as the DRA helper does not: besides itself it imports
the generated protos, serving/, and value types and helpers of core/ and config/ (its devices and their
two decisions come from the front-end through the ServedResource protocol)."""

from __future__ import annotations

from tests import layering_rules
from tests.layering_rules import matches
from tests.test_layering import CODE, SOURCE

DP_HELPER = "device_plugin.dp_helper"
DP_HELPER_MAY_IMPORT = (
    "api",  # the generated device-plugin and registration protos
    "device_plugin.serving",  # the sockets, served
    "device_plugin.config.schema",  # the socket-naming choices (socketNames)
    "device_plugin.core.errors",
    "device_plugin.core.short_text",
    "device_plugin.core.backoff",
    "device_plugin.core.call_log",  # the one rate-limited INFO line per kubelet call
    "device_plugin.core.instance_id",  # the instance id of per-instance socket names, one rule in both modes
    "device_plugin.core.devices",  # the device list and an Allocate answer, value types
)


def test_the_device_plugin_helper_knows_no_gpu() -> None:
    helper = [m for m in CODE if matches(m, DP_HELPER)]
    assert len(helper) >= 8, helper
    assert layering_rules.beyond_allowed(dict(SOURCE.edges), DP_HELPER, DP_HELPER_MAY_IMPORT) == {}
    assert any(t.startswith("device_plugin.serving") for m in helper for t in SOURCE.edges[m])  # exercised


def test_the_check_catches_a_gpu_import() -> None:
    edges = {f"{DP_HELPER}.servicer": frozenset({"device_plugin.allocation.resources", "device_plugin.core.errors"})}
    assert layering_rules.beyond_allowed(edges, DP_HELPER, DP_HELPER_MAY_IMPORT) == {
        f"{DP_HELPER}.servicer": ["device_plugin.allocation.resources"]
    }
