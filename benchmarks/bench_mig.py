"""Print how long the MIG GetPreferredAllocation policy takes on the a100-mig-7x1g machine (56 MIG devices).

Run: .venv/bin/python benchmarks/bench_mig.py
"""

from __future__ import annotations

import time

import _common  # noqa: F401  (puts the checkout on sys.path)

from device_plugin.allocation.protocols import device_sort_key
from device_plugin.allocation.request import validate_preferred
from device_plugin.config.sharing_model import Placement
from device_plugin.mig.discovery import discover
from device_plugin.mig.policy import MigAllocationPolicy
from device_plugin.mig.strategy import build_resources
from device_plugin.nvml.fake.machine import FakeNvml

ROUNDS = 300


def main() -> None:
    inventory = discover(FakeNvml.from_machine("a100-mig-7x1g"))
    resources = build_resources(inventory.gpus, inventory.devices_by_gpu, "mixed")
    devices = {d.id: d for d in resources["nvidia.com/mig-1g.5gb"]}
    ids = sorted(devices)
    rank = {d.id: position for position, d in enumerate(sorted(devices.values(), key=device_sort_key))}
    for placement in Placement:
        policy = MigAllocationPolicy(placement)
        for size in (1, 8, 28, 56):
            # Validated once, outside the timing: this measures the policy alone (as before the split).
            request = validate_preferred("nvidia.com/mig-1g.5gb", devices, rank, ids, [], size)
            start = time.perf_counter()
            for _ in range(ROUNDS):
                policy.choose(request)
            per_call_us = (time.perf_counter() - start) / ROUNDS * 1e6
            print(f"{placement.value:6} size {size:2}: {per_call_us:7.0f} us per choose over {len(ids)} MIG devices")


if __name__ == "__main__":
    main()
