"""Node labels from what the daemon actually serves: MIG profiles (GFD's keys) and replica memory."""

from __future__ import annotations

from pathlib import Path

from device_plugin.config.loader import load_config
from device_plugin.core.names import OWN_DOMAIN
from device_plugin.dp.composition import build_node
from device_plugin.dp.resource_reporting import label_options
from device_plugin.nvml.fake.machine import FakeNvml
from device_plugin.observability.labels import compute_labels


def test_mig_mixed_labels_each_served_profile() -> None:
    fake = FakeNvml.from_machine("h100-mig-mixed")
    config = load_config(env={"MIG_STRATEGY": "mixed"})
    labels = compute_labels(fake, label_options(build_node(fake, config), config))
    assert labels["nvidia.com/mig.strategy"] == "mixed"
    assert labels["nvidia.com/mig-1g.10gb.count"] == "8"
    assert labels["nvidia.com/mig-3g.40gb.count"] == "2"
    assert labels["nvidia.com/mig-7g.80gb.multiprocessors"] == "132"
    assert int(labels["nvidia.com/mig-3g.40gb.memory"]) < int(labels["nvidia.com/gpu.memory"])


def test_time_slicing_labels_replicas_and_the_memory_each_can_count_on(tmp_path: Path) -> None:
    config_file = tmp_path / "config.yaml"
    config_file.write_text("version: v1\nsharing: {timeSlicing: {resources: [{name: nvidia.com/gpu, replicas: 4}]}}\n")
    fake = FakeNvml.from_machine("hgx-h100")
    config = load_config(config_file=config_file)
    labels = compute_labels(fake, label_options(build_node(fake, config), config))
    assert labels["nvidia.com/gpu.replicas"] == "4"
    assert labels["nvidia.com/gpu.sharing-strategy"] == "time-slicing"
    assert labels["nvidia.com/gpu.product"].endswith("-SHARED")
    assert labels[f"{OWN_DOMAIN}/gpu.replica-memory"] == str(81559 // 4)
    assert "nvidia.com/gpu.replica-memory" not in labels  # ours, not GFD's: never in NVIDIA's namespace


def test_unshared_whole_gpus_get_no_mig_or_replica_memory_labels() -> None:
    fake = FakeNvml.from_machine("dgx1-v100")
    config = load_config()
    labels = compute_labels(fake, label_options(build_node(fake, config), config))
    assert labels["nvidia.com/gpu.replicas"] == "1"
    assert not [k for k in labels if k.startswith("nvidia.com/mig-") or k.endswith(".replica-memory")]
