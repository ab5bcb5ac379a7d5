"""The whole DRA driver's metrics and config reloads: the node runtime with the DRA front-end on fake NVML +
health, the DRA kubelet stand-in, the API stand-in (testbed/dra_node.py).

Metrics in DRA mode show the GPU gauges and count each health transition once; an edit of the config file
reaches DRA mode: a labels file applies at once, a mode or driver-name change waits for a restart, an
invalid file is refused and the running config stays.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path

import pytest

from device_plugin.config.model import Config
from device_plugin.nvml.health_types import HealthEvent, HealthEventKind
from testbed.dra_node import DRIVER, Node, eventually


def test_metrics_in_dra_mode_show_gpu_gauges_and_count_each_health_transition_once(node: Node) -> None:
    node.start()
    assert node.runtime is not None
    registry = node.runtime.registry
    gpu3 = next(g for g in node.fake.gpus() if g.index == 3)
    gauge = registry.get_sample_value(
        "gpu_device_plugin_gpu_memory_total_bytes", {"gpu": "3", "uuid": gpu3.uuid, "model": gpu3.name}
    )
    assert gauge == gpu3.memory_mib * 1024 * 1024
    # Xid 94 (contained ECC error) leaves no sticky state a probe could see first: the event decides.
    node.fake.test_hooks.inject(HealthEvent(3, HealthEventKind.XID, xid=94))
    labels = {"resource": DRIVER, "from_health": "Healthy", "to_health": "Unhealthy", "reason": "xid", "xid": "94"}
    assert eventually(lambda: registry.get_sample_value("gpu_device_plugin_health_transitions_total", labels) == 1)
    # No device-plugin resources in this mode: no inventory series.
    assert "gpu_device_plugin_devices" not in {family.name for family in registry.collect()}


def labels_of(path: Path) -> dict[str, str]:
    return dict(line.split("=", 1) for line in path.read_text().splitlines() if "=" in line)


RUNNING = "version: v1\ngpuDevicePlugin:\n  mode: dra\n"
RELOADS = [
    # (edit of the file, what the log says, what the running config holds after)
    ("labelsFile: {labels}", "labels file now", lambda c, labels: c.daemon.labels_file == str(labels)),
    (
        "mode: device-plugin",
        "gpuDevicePlugin.mode changed; it takes effect when the plugin restarts",
        lambda c, labels: c.daemon.mode == "dra",
    ),
    (
        "driverName: gpu.example.com",
        "gpuDevicePlugin.driverName changed; it takes effect when the plugin restarts",
        lambda c, labels: c.daemon.driver_name == DRIVER,
    ),
    (
        "rescanIntervalSeconds: -1",
        "config file changed but is invalid, keeping the running config: gpuDevicePlugin.rescanIntervalSeconds",
        lambda c, labels: c.daemon.rescan_interval_s == 3600.0,
    ),
]


@pytest.mark.parametrize(
    ("edit", "logged", "holds"),
    RELOADS,
    ids=["labels-file-applies-at-once", "mode-needs-a-restart", "driver-name-needs-a-restart", "invalid-is-refused"],
)
def test_a_config_file_edit_reaches_dra_mode(
    node: Node,
    caplog: pytest.LogCaptureFixture,
    edit: str,
    logged: str,
    holds: Callable[[Config, Path], bool],
) -> None:
    node.config_file.write_text(RUNNING)
    driver = node.start()
    assert driver.publisher.wait_synced(10.0) and node.runtime is not None
    labels = node.root / "features.d" / "gpu"
    labels.parent.mkdir()
    kept = "" if edit.startswith("mode:") else "  mode: dra\n"  # a key appears once
    node.config_file.write_text(f"version: v1\ngpuDevicePlugin:\n{kept}  {edit.format(labels=labels)}\n")
    with caplog.at_level(logging.INFO, logger="device_plugin"):
        assert not node.rescan()  # nothing published changed
    assert logged in caplog.text
    assert "applied" not in caplog.text
    assert holds(node.runtime.config, labels)
    assert labels.exists() == ("labelsFile" in edit)
    if labels.exists():
        assert labels_of(labels)["nvidia.com/gpu.count"] == "8"
    assert len(node.published()) == 8
