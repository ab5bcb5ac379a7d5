"""The whole daemon over the kubelet stand-in: metrics and probes over HTTP, faults, config reload,
MIG re-layout. Every wait is on a condition with a generous bound; nothing asserts on timing."""

from __future__ import annotations

import shutil
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from device_plugin.config import load_config
from device_plugin.daemon import Daemon
from device_plugin.health_config import HealthConfig
from device_plugin.kubelet_standin import KubeletStandIn
from device_plugin.lifecycle import LifecycleTiming
from device_plugin.nvml.fake import FakeNvml
from device_plugin.nvml.health_types import HealthEvent, HealthEventKind
from device_plugin.registration import Backoff

GPU = "nvidia.com/gpu"
WAIT_S = 15.0
TIMING = LifecycleTiming(
    register_timeout_s=10.0, backoff=Backoff(initial_s=0.05, factor=2.0, max_s=0.5), stop_grace_s=0.2, debounce_s=0.05
)
TIME_SLICING = """
version: v1
sharing:
  timeSlicing:
    renameByDefault: true
    resources:
      - name: nvidia.com/gpu
        replicas: 2
"""


@dataclass
class Node:
    fake: FakeNvml
    daemon: Daemon
    kubelet: KubeletStandIn
    config_file: Path

    def get(self, path: str) -> tuple[int, str]:
        assert self.daemon.endpoint is not None
        url = f"http://127.0.0.1:{self.daemon.endpoint.port}{path}"
        try:
            with urllib.request.urlopen(url, timeout=5) as reply:
                return reply.status, reply.read().decode()
        except urllib.error.HTTPError as error:
            return error.code, error.read().decode()

    def sample(self, name: str, **labels: str) -> float:
        _, text = self.get("/metrics")
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                if sample.name == name and all(sample.labels.get(k) == v for k, v in labels.items()):
                    return sample.value
        return 0.0

    def listed(self, resource: str) -> dict[str, str]:
        return {d.id: d.health for d in self.kubelet.latest_devices(resource)}


@pytest.fixture
def node(request: pytest.FixtureRequest) -> Iterator[Node]:
    machine = getattr(request, "param", "dgx1-v100")
    plugin_dir = Path(tempfile.mkdtemp(prefix="gdp-d-", dir="/tmp"))
    config_file = plugin_dir.parent / f"{plugin_dir.name}.yaml"
    config_file.write_text("version: v1\n")
    env = {"DEVICE_PLUGIN_DIR": str(plugin_dir), "METRICS_ADDRESS": "127.0.0.1:0"}

    def load():  # type: ignore[no-untyped-def]
        config = load_config(config_file=config_file, env=env)
        fast_health = HealthConfig(quiet_period_s=0.2, probe_interval_s=0.05, event_wait_s=0.05)
        return type(config)(
            **{
                **config.__dict__,
                "daemon": type(config.daemon)(
                    **{**config.daemon.__dict__, "health": fast_health, "rescan_interval_s": 3600.0}
                ),
            }
        )

    fake = FakeNvml.from_machine(machine)
    kubelet = KubeletStandIn(plugin_dir)
    kubelet.start()
    daemon = Daemon(fake, load(), load_config=load, config_file=config_file, timing=TIMING)
    daemon.start()
    started = Node(fake, daemon, kubelet, config_file)
    yield started
    daemon.stop()
    kubelet.stop()
    shutil.rmtree(plugin_dir, ignore_errors=True)
    config_file.unlink(missing_ok=True)


def test_registered_daemon_is_ready_alive_and_counts_allocations(node: Node) -> None:
    node.kubelet.wait_for_connection(GPU, timeout_s=WAIT_S)
    deadline = time.monotonic() + WAIT_S
    while node.get("/readyz")[0] != 200:  # readiness follows the Register reply, a moment after the dial-back
        assert time.monotonic() < deadline, node.get("/readyz")
        time.sleep(0.02)
    assert node.get("/healthz")[0] == 200
    admission = node.kubelet.admit(GPU, 4)
    assert len(admission.preferred) == 4
    assert node.sample("gpu_device_plugin_allocations_total", resource=GPU, result="ok") == 1
    assert node.sample("gpu_device_plugin_preferred_allocations_total", resource=GPU, result="ok") == 1
    assert node.sample("gpu_device_plugin_allocation_decisions_total", resource=GPU, size="4", optimal="true") == 1
    assert node.sample("gpu_device_plugin_devices", resource=GPU, health="Healthy") == 8


def test_a_fault_reaches_the_kubelet_and_the_metrics(node: Node) -> None:
    node.kubelet.wait_for_connection(GPU, timeout_s=WAIT_S)
    uuid = node.fake.gpus()[3].uuid
    node.fake.faults.inject(HealthEvent(3, HealthEventKind.XID, xid=79))
    node.kubelet.wait_for(lambda: node.listed(GPU).get(uuid) == "Unhealthy" or None, WAIT_S)
    assert node.sample("gpu_device_plugin_devices", resource=GPU, health="Unhealthy") == 1
    node.fake.faults.recover(3)
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
    assert {r.resource_name for r in node.daemon.node.resources} == {f"{GPU}.shared"}


@pytest.mark.parametrize("node", ["h100-mig-mixed"], indirect=True, ids=["h100-mig-mixed"])
def test_a_mig_re_layout_is_re_advertised_without_a_restart(node: Node) -> None:
    node.kubelet.wait_for_connection(GPU, timeout_s=WAIT_S)
    node.config_file.write_text("version: v1\nflags: {migStrategy: mixed}\n")
    assert node.daemon.rebuild()
    node.kubelet.wait_for_connection("nvidia.com/mig-3g.40gb", timeout_s=WAIT_S)
    before = node.daemon.node.layout()
    # The config change re-served every resource: wait for the second nvidia.com/gpu registration.
    whole_gpus = node.kubelet.wait_for_connection(GPU, count=2, timeout_s=WAIT_S)  # GPUs 4-7: not re-laid out
    node.kubelet.wait_for(lambda: bool(whole_gpus.lists) or None, WAIT_S)
    first_mig_gpu = next(g.index for g in node.fake.gpus() if node.fake.mig_devices(g.index))
    dropped = {d.uuid for d in node.fake.mig_devices(first_mig_gpu)}
    node.fake.set_mig_layout(first_mig_gpu, [{"profile": "7g.80gb", "count": 1}])
    assert node.daemon.rebuild()
    after = node.daemon.node.layout()
    assert len(after["nvidia.com/mig-7g.80gb"]) == len(before.get("nvidia.com/mig-7g.80gb", ())) + 1
    assert not dropped & {i for ids in after.values() for i in ids}
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
    assert "nvidia.com/mig-7g.80gb" not in node.daemon.node.layout()
    node.kubelet.wait_for(lambda: (big.stream_ended and big.lists[-1] == ()) or None, WAIT_S)
    whole = node.kubelet.wait_for_connection(GPU, count=3, timeout_s=WAIT_S)
    node.kubelet.wait_for(lambda: len(whole.lists[-1]) == 5 or None, WAIT_S)
    assert node.fake.gpus()[parent].uuid in {d.id for d in whole.lists[-1]}
