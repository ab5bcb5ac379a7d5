"""The MIG tree for `gpu-device-plugin topology` (mig/'s import boundary is in tests/test_layering.py)."""

from __future__ import annotations

from device_plugin.mig.render import render_mig_tree
from device_plugin.nvml.fake.machine import FakeNvml


def test_tree_lists_mig_devices_under_their_parents() -> None:
    fake = FakeNvml.from_machine("h100-mig-mixed")
    lines = render_mig_tree(fake).splitlines()
    gpu_lines = [i for i, line in enumerate(lines) if line.startswith("GPU ")]
    assert len(gpu_lines) == 8
    under_gpu_2 = lines[gpu_lines[2] + 1 : gpu_lines[3]]
    assert [line.split()[1] for line in under_gpu_2] == ["2g.20gb", "1g.10gb+me", "1g.10gb", "3g.40gb"]
    assert all(d.uuid in "\n".join(under_gpu_2) for d in fake.mig_devices(2))
    assert "nvidia.com/mig-1g.10gb.me" in under_gpu_2[1]
    assert lines[gpu_lines[4]].endswith("MIG disabled")


def test_tree_of_a_node_without_mig_support() -> None:
    text = render_mig_tree(FakeNvml.from_machine("dgx1-v100"))
    assert text.count("MIG not supported") == 8
