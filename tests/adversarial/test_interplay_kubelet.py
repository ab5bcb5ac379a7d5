"""Kubelet interplay the device-plugin API cannot prevent, so the plugin warns or explains:

- one container holding two of our resources under `deviceListStrategy: envvar` alone gets two
  NVIDIA_VISIBLE_DEVICES values, and the kubelet keeps one at random: warned at start;
- `requireDistinctGPUs` meets a set the kubelet chose itself (the Topology Manager skips
  GetPreferredAllocation when the NUMA-aligned devices exactly cover the request): the Allocate refusal
  names the Topology Manager policy and what to do.
"""

from __future__ import annotations

import logging
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
import yaml

from api import deviceplugin_pb2 as pb
from device_plugin.config.model import Config, DaemonSettings, parse_config
from device_plugin.core.errors import InvalidRequestError
from device_plugin.dp.composition import build_node, envvar_conflicts
from device_plugin.dp.front_end import device_plugin_runtime
from device_plugin.dp_helper.lifecycle import PluginManager
from device_plugin.nvml.backends import open_backend
from device_plugin.standins.kubelet_device_plugin import KubeletStandIn
from testbed.timing import FAST_LIFECYCLE


def _config(text: str) -> Config:
    return parse_config(yaml.safe_load(text) or {})


RENAMED_PARTIAL_SHARE = """
sharing:
  timeSlicing:
    resources:
      - {name: nvidia.com/gpu, replicas: 4, rename: gpu-quarter, devices: [0, 1]}
"""
SHARE_ALL = """
sharing:
  timeSlicing:
    resources:
      - {name: nvidia.com/gpu, replicas: 4}
"""


@pytest.mark.parametrize(
    "machine, config, warned",
    [
        ("dgx1-v100", "", False),
        ("h100-mig-mixed", "flags: {migStrategy: mixed}", True),
        ("h100-mig-mixed", "flags: {migStrategy: none}", False),
        ("h100-mig-mixed", "flags: {migStrategy: mixed, plugin: {deviceListStrategy: volume-mounts}}", False),
        ("h100-mig-mixed", "flags: {migStrategy: mixed, plugin: {deviceListStrategy: [envvar, cdi-cri]}}", False),
        ("a100-mig-7x1g", "flags: {migStrategy: mixed}", False),
        ("workstation-4gpu", RENAMED_PARTIAL_SHARE, True),
        ("workstation-4gpu", SHARE_ALL, False),
    ],
    ids=[
        "whole GPUs only",
        "whole GPUs and MIG profiles under envvar",
        "MIG left out under none",
        "volume-mounts merge",
        "CDI next to envvar merges",
        "one MIG profile alone",
        "renamed time-slicing next to whole GPUs",
        "every GPU shared under its own name",
    ],
)
def test_envvar_conflict_warning(machine: str, config: str, warned: bool) -> None:
    parsed = _config(config)
    backend = open_backend(machine)
    try:
        warnings = envvar_conflicts(build_node(backend, parsed), parsed)
    finally:
        backend.close()
    assert bool(warnings) is warned
    if warned:
        (text,) = warnings
        assert "NVIDIA_VISIBLE_DEVICES" in text and "volume-mounts" in text and "cdi" in text


def test_the_daemon_logs_the_envvar_warning_at_start(caplog: pytest.LogCaptureFixture) -> None:
    config = _config("flags: {migStrategy: mixed}")
    config = Config(flags=config.flags, daemon=DaemonSettings(metrics_address=""))
    backend = open_backend("h100-mig-mixed")
    with caplog.at_level(logging.WARNING, logger="device_plugin.dp.front_end"):
        device_plugin_runtime(backend, config)
    backend.close()
    assert any(
        "NVIDIA_VISIBLE_DEVICES" in r.getMessage() and "nvidia.com/mig-1g.10gb" in r.getMessage()
        for r in caplog.records
    )


DISTINCT = """
sharing:
  timeSlicing:
    requireDistinctGPUs: true
    resources:
      - {name: nvidia.com/gpu, replicas: 2}
"""


def test_distinct_refusal_names_the_topology_manager() -> None:
    config = _config(DISTINCT)
    backend = open_backend("workstation-4gpu")
    (resource,) = build_node(backend, config).resources
    backend.close()
    same_gpu = [d.id for d in resource.snapshot().devices if d.gpu_indices == (0,)]
    with pytest.raises(InvalidRequestError) as refused:
        resource.allocate(same_gpu)
    message = str(refused.value)
    assert "Topology Manager" in message and "single-numa-node" in message and "none" in message


@pytest.fixture
def plugin_dir() -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="gdp-", dir="/tmp"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


def test_a_kubelet_chosen_set_is_refused_over_grpc_with_the_advice(plugin_dir: Path) -> None:
    """The kubelet skips GetPreferredAllocation and sends Allocate with two replicas of GPU 0."""
    config = _config(DISTINCT)
    backend = open_backend("workstation-4gpu")
    (resource,) = build_node(backend, config).resources
    kubelet = KubeletStandIn(plugin_dir)
    kubelet.start()
    manager = PluginManager(resource, plugin_dir, timing=FAST_LIFECYCLE)
    manager.start()
    try:
        connection = kubelet.wait_for_connection("nvidia.com/gpu", timeout_s=10.0)
        gpu0 = resource.snapshot().devices[0].id.partition("::")[0]
        same_gpu = [d.id for d in connection.lists[0] if d.id.partition("::")[0] == gpu0]
        request = pb.AllocateRequest(container_requests=[pb.ContainerAllocateRequest(devices_ids=same_gpu[:2])])
        with pytest.raises(grpc.RpcError) as refused:
            connection.stub.Allocate(request, timeout=10.0)
    finally:
        manager.stop()
        kubelet.stop()
        backend.close()
    assert refused.value.code() is grpc.StatusCode.INVALID_ARGUMENT  # type: ignore[attr-defined]
    assert "Topology Manager" in refused.value.details()  # type: ignore[attr-defined]
