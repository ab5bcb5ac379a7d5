"""What the real node's answers are compared with: the machine's GPUs and the allocator's best sets, asked of
the `gpu-device-plugin` CLI (the same allocator GetPreferredAllocation runs), never written by hand."""

from __future__ import annotations

import json
import subprocess
from functools import cache

from device_plugin.nvml.backends import open_backend
from testbed.realnode.our_daemon import CLI


@cache
def uuids(machine: str) -> tuple[str, ...]:
    """The machine's whole-GPU UUIDs by index."""
    backend = open_backend(machine)
    try:
        return tuple(gpu.uuid for gpu in sorted(backend.gpus(), key=lambda g: g.index))
    finally:
        backend.close()


def index_of(machine: str, uuid: str) -> int:
    return uuids(machine).index(uuid)


def best_set(machine: str, size: int, free: set[int] | None = None) -> set[str]:
    """The UUIDs the allocator chooses for `size` GPUs among `free` (default: all) on `machine`."""
    argv = [str(CLI), "allocate", "--machine", machine, "--size", str(size), "--json"]
    if free is not None:
        argv += ["--available", ",".join(str(i) for i in sorted(free))]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=True)
    return set(json.loads(done.stdout)["devices"])
