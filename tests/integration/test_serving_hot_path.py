"""What the GetPreferredAllocation fast path must keep: the same answers (a cached decision equals a
fresh one), one decision hook call and one log line per request, and log lines still written (with
tracebacks) when the writer thread is flushed at exit."""

from __future__ import annotations

import json
import logging
import random
import subprocess
import sys

import pytest

from device_plugin.allocation.whole_gpu_selection import TopologyPolicy
from device_plugin.gpu_sets import Allocator
from device_plugin.gpu_sets.decision import AllocationDecision
from device_plugin.nvml.backends import open_backend
from device_plugin.topology.build import build_topology
from tests.composed import gpu_devices
from tests.validated import validated


@pytest.mark.parametrize("machine", ["dgx1-v100", "island-16gpu"], ids=["8-gpus", "16-gpus"])
def test_a_cached_decision_equals_a_fresh_one_and_each_request_is_reported(
    machine: str, caplog: pytest.LogCaptureFixture
) -> None:
    backend = open_backend(machine)
    allocator = Allocator(build_topology(backend))
    heard: list[AllocationDecision] = []
    cached = TopologyPolicy(allocator, on_decision=heard.append)
    devices = {d.id: d for d in gpu_devices(backend.gpus())}
    ids = sorted(devices, key=lambda i: devices[i].gpu_indices)
    rng = random.Random(3)
    requests = []
    for _ in range(60):
        size = rng.choice([1, 2, 4, 8])
        available = sorted(rng.sample(ids, rng.randint(size, len(ids))), key=ids.index)
        must = sorted(rng.sample(available, rng.randint(0, min(2, size))), key=ids.index)
        requests.append((available, must, size))
    requests += requests  # every request twice: the second answer comes from the cache
    with caplog.at_level(logging.DEBUG, logger="device_plugin.allocation.whole_gpu_selection"):
        for available, must, size in requests:
            fresh = TopologyPolicy(allocator).choose(validated(devices, available, must, size))
            assert cached.choose(validated(devices, available, must, size)) == fresh
    assert len(heard) == len(requests)
    assert len([r for r in caplog.records if r.name == "device_plugin.allocation.whole_gpu_selection"]) == 2 * len(
        requests
    )


@pytest.mark.parametrize("log_format", ["text", "json"])
def test_log_lines_from_the_writer_thread_reach_stderr_by_exit(log_format: str) -> None:
    script = (
        "import logging\n"
        "from device_plugin.commands.run import configure_logging\n"
        f"configure_logging({log_format!r})\n"
        "log = logging.getLogger('device_plugin.x')\n"
        "for i in range(200): log.info('line %d of %s', i, 'many')\n"
        "try:\n    1 / 0\nexcept ZeroDivisionError:\n    log.exception('failed here')\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=30)
    lines = done.stderr.splitlines()
    assert sum("of many" in line for line in lines) == 200
    assert "line 199 of many" in done.stderr
    if log_format == "json":
        entries = [json.loads(line) for line in lines]
        assert entries[-1]["msg"] == "failed here"
        assert "ZeroDivisionError" in entries[-1]["exc"]
    else:
        assert "failed here" in done.stderr and "ZeroDivisionError: division by zero" in done.stderr
