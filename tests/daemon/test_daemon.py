"""The whole daemon over the kubelet stand-in: metrics and probes over HTTP, faults, config reload,
MIG re-layout. Every wait is on a condition with a generous bound; nothing asserts on timing."""

from __future__ import annotations

import logging
import time

import pytest

from device_plugin.nvml.health_types import HealthEvent, HealthEventKind

from .harness import GPU, TIME_SLICING, WAIT_S, Node


def test_registered_daemon_is_ready_alive_and_counts_allocations(node: Node) -> None:
    node.kubelet.wait_for_connection(GPU, timeout_s=WAIT_S)
    deadline = time.monotonic() + WAIT_S
    while node.get("/readyz")[0] != 200:  # readiness follows the Register reply, a moment after the dial-back
        assert time.monotonic() < deadline, node.get("/readyz")
        time.sleep(0.02)
    # liveness self-probes with a 1 s deadline, which a loaded box can miss once: asked again until WAIT_S
    deadline = time.monotonic() + WAIT_S
    while node.get("/healthz")[0] != 200:
        assert time.monotonic() < deadline, node.get("/healthz")
        time.sleep(0.02)
    admission = node.kubelet.admit(GPU, 4)
    assert len(admission.preferred) == 4
    assert node.sample("gpu_device_plugin_allocations_total", resource=GPU, result="ok") == 1
    assert node.sample("gpu_device_plugin_preferred_allocations_total", resource=GPU, result="ok") == 1
    assert node.sample("gpu_device_plugin_allocation_decisions_total", resource=GPU, size="4", optimal="true") == 1
    assert node.sample("gpu_device_plugin_devices", resource=GPU, health="Healthy") == 8


def test_a_fault_reaches_the_kubelet_and_the_metrics(node: Node) -> None:
    node.kubelet.wait_for_connection(GPU, timeout_s=WAIT_S)
    uuid = node.fake.gpus()[3].uuid
    node.fake.test_hooks.inject(HealthEvent(3, HealthEventKind.XID, xid=79))
    node.kubelet.wait_for(lambda: node.listed(GPU).get(uuid) == "Unhealthy" or None, WAIT_S)
    assert node.sample("gpu_device_plugin_devices", resource=GPU, health="Unhealthy") == 1
    node.fake.test_hooks.recover(3)
    node.kubelet.wait_for(lambda: node.listed(GPU).get(uuid) == "Healthy" or None, WAIT_S)


def test_a_valid_config_change_re_serves_and_an_invalid_one_is_ignored(node: Node) -> None:
    node.kubelet.wait_for_connection(GPU, timeout_s=WAIT_S)
    node.config_file.write_text(TIME_SLICING)
    assert node.daemon.rebuild()
    shared = node.kubelet.wait_for_connection(f"{GPU}.shared", timeout_s=WAIT_S)
    node.kubelet.wait_for(lambda: len(shared.lists[-1]) == 16 or None, WAIT_S)
    # The old resource was closed with an empty list before its server stopped: no stale capacity.
    old = node.kubelet.current(GPU)
    node.kubelet.wait_for(lambda: any(len(listed) == 0 for listed in old.lists) or None, WAIT_S)
    node.config_file.write_text("version: v1\nflags: {migStrategy: sideways}\n")
    assert not node.daemon.rebuild()
    assert {r.resource_name for r in node.daemon.front_end.node.resources} == {f"{GPU}.shared"}


def test_a_bad_sharing_section_is_refused_at_load_and_an_absent_gpu_at_build(
    node: Node, caplog: pytest.LogCaptureFixture
) -> None:
    node.kubelet.wait_for_connection(GPU, timeout_s=WAIT_S)
    shared = "version: v1\nsharing: {timeSlicing: {resources: [{name: %s, replicas: 2, rename: part%s}]}}\n"
    node.config_file.write_text(shared % ("amd.com/gpu", ""))  # not shareable: the config does not load
    with caplog.at_level(logging.ERROR, logger="device_plugin.node.runtime"):
        assert not node.daemon.rebuild()
    assert "config file changed but is invalid" in caplog.text and "resources[0].name" in caplog.text
    caplog.clear()
    node.config_file.write_text(shared % (GPU, ", devices: [99]"))  # loads; this node has no GPU 99
    with caplog.at_level(logging.ERROR, logger="device_plugin.node.runtime"):
        assert not node.daemon.rebuild()
    assert "rebuilding the resources failed" in caplog.text and "no GPU with index 99" in caplog.text
    assert {r.resource_name for r in node.daemon.front_end.node.resources} == {GPU}


@pytest.mark.parametrize("node", ["h100-mig-mixed"], indirect=True, ids=["h100-mig-mixed"])
def test_a_mig_re_layout_is_re_advertised_without_a_restart(node: Node) -> None:
    node.kubelet.wait_for_connection(GPU, timeout_s=WAIT_S)
    node.config_file.write_text("version: v1\nflags: {migStrategy: mixed}\n")
    assert node.daemon.rebuild()
    node.kubelet.wait_for_connection("nvidia.com/mig-3g.40gb", timeout_s=WAIT_S)
    before = node.daemon.front_end.node.layout()
    # The config change re-served every resource: wait for the second nvidia.com/gpu registration.
    whole_gpus = node.kubelet.wait_for_connection(GPU, count=2, timeout_s=WAIT_S)  # GPUs 4-7: not re-laid out
    node.kubelet.wait_for(lambda: bool(whole_gpus.lists) or None, WAIT_S)
    first_mig_gpu = next(g.index for g in node.fake.gpus() if node.fake.mig_devices(g.index))
    dropped = {d.uuid for d in node.fake.mig_devices(first_mig_gpu)}
    node.fake.set_mig_layout(first_mig_gpu, [{"profile": "7g.80gb", "count": 1}])
    assert node.daemon.rebuild()
    after = node.daemon.front_end.node.layout()
    assert len(after["nvidia.com/mig-7g.80gb"]) == len(before.get("nvidia.com/mig-7g.80gb", ())) + 1
    assert not dropped & {device_id for devices in after.values() for device_id, _ in devices}
    listed = node.kubelet.wait_for_connection("nvidia.com/mig-7g.80gb", timeout_s=WAIT_S)
    node.kubelet.wait_for(lambda: len(listed.lists[-1]) == len(after["nvidia.com/mig-7g.80gb"]) or None, WAIT_S)
    # A resource whose devices did not change kept its server and stream: no empty list, no re-registration.
    assert node.kubelet.current(GPU) is whole_gpus
    assert not whole_gpus.stream_ended and all(len(listed) == 4 for listed in whole_gpus.lists)
    assert not node.daemon.rebuild()  # nothing changed since: no re-serve


@pytest.mark.parametrize("node", ["h100-mig-mixed"], indirect=True, ids=["h100-mig-mixed"])
def test_disabling_mig_on_a_gpu_returns_it_to_whole_gpus_and_empties_its_mig_resource(node: Node) -> None:
    node.kubelet.wait_for_connection(GPU, timeout_s=WAIT_S)
    node.config_file.write_text("version: v1\nflags: {migStrategy: mixed}\n")
    assert node.daemon.rebuild()
    big = node.kubelet.wait_for_connection("nvidia.com/mig-7g.80gb", timeout_s=WAIT_S)
    parent = next(
        g.index for g in node.fake.gpus() if any(d.profile == "7g.80gb" for d in node.fake.mig_devices(g.index))
    )
    node.fake.set_mig_layout(parent, [], enabled=False)
    assert node.daemon.rebuild()
    assert "nvidia.com/mig-7g.80gb" not in node.daemon.front_end.node.layout()
    node.kubelet.wait_for(lambda: (big.stream_ended and big.lists[-1] == ()) or None, WAIT_S)
    whole = node.kubelet.wait_for_connection(GPU, count=3, timeout_s=WAIT_S)
    node.kubelet.wait_for(lambda: len(whole.lists[-1]) == 5 or None, WAIT_S)
    assert node.fake.gpus()[parent].uuid in {d.id for d in whole.lists[-1]}
