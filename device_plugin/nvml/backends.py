"""The one place that picks an NVML backend: the real pynvml one, or the fake of a machine
description.

Boundary: choosing and constructing a backend; what a machine name means is catalog.py's, what a
backend answers is real.py's and fake.py's. Kept apart from the catalog so that the fake can use the
catalog (FakeNvml.from_machine) without an import cycle.
"""

from __future__ import annotations

from pathlib import Path

from device_plugin.nvml.fake.catalog import load_machine_description
from device_plugin.nvml.fake.machine import FakeNvml
from device_plugin.nvml.protocol import NvmlBackend


def open_backend(machine: str | None, *, sys_root: Path = Path("/sys")) -> NvmlBackend:
    """The real NVML backend when `machine` is None, else a FakeNvml of that machine.

    `sys_root` only matters to the real backend (NUMA nodes come from sysfs); a fake's NUMA nodes
    come from its description.
    """
    if machine is None:
        # deferred: loading pynvml is only needed on real nodes
        from device_plugin.nvml.real.backend import RealNvml

        return RealNvml(sys_root=sys_root)
    return FakeNvml(load_machine_description(machine))
