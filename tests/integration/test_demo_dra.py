"""`demo --mode dra` walks through registration, the slices, a claim prepared, a fault (taint), recovery and
shutdown on the stand-ins, and says what happened at each step: on two named machines line by line, and on
every shipped machine step by step."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator

import pytest

from device_plugin.cli import main
from device_plugin.nvml.fake.catalog import shipped_machine_names
from device_plugin.nvml.fake.machine import FakeNvml

STEPS = (
    "\n1. The driver starts",
    "\n2. The pool demo-node",
    "\n3. A pod's claim",
    "\n4. GPU ",
    "\n5. The GPU comes",
    "\n6. The pod ends",
)


@pytest.fixture(autouse=True)
def _root_logger_restored() -> Iterator[None]:
    """The demo configures logging like a program does; undo it so later tests still see INFO records."""
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    yield
    root.handlers[:] = handlers
    root.setLevel(level)


def demo(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    assert main(["demo", "--mode", "dra", "--fast", *argv]) == 0
    return capsys.readouterr().out


def uuid_of(machine: str, gpu: int, mig: int | None = None) -> str:
    fake = FakeNvml.from_machine(machine)
    try:
        return fake.gpus()[gpu].uuid if mig is None else fake.mig_devices(gpu)[mig].uuid
    finally:
        fake.close()


def in_order(out: str, lines: list[str | tuple[str, ...]]) -> list[str | tuple[str, ...]]:
    """The expected lines missing from `out`, or found out of order (each searched after the previous); a
    tuple is a line with alternatives, any one of which will do."""
    missing: list[str | tuple[str, ...]] = []
    at = 0
    for line in lines:
        hits = [(out.find(alt, at), alt) for alt in (line if isinstance(line, tuple) else (line,))]
        found = [(i, alt) for i, alt in hits if i >= 0]
        if not found:
            missing.append(line)
        else:
            i, alt = min(found)
            at = i + len(alt)
    return missing


# Xid 79 makes the GPU lost, and the watcher hears it twice: from the event and from the next probe. Under
# load the probe can win (tests/probes_held.py); the GPU is then tainted and reported as lost (NVIDIA's key).
def fault(device: str) -> list[str | tuple[str, ...]]:
    return [
        (f"   {device}: gpu.nvidia.com/xid=79:NoSchedule", f"   {device}: gpu.nvidia.com/gpu-lost:NoSchedule"),
        (f"health stream says {device} is unhealthy: Xid 79", f"health stream says {device} is unhealthy: "),
    ]


CASES = {
    # Whole GPUs: the claim gets gpu-0 (first in the pool), the fault hits GPU 7 (one device).
    "dgx1-v100": (
        "dgx1-v100",
        lambda: [
            "Simulated node 'dgx1-v100': 8 GPUs; DRA driver gpu.gpu-device-plugin.io, node demo-node.",
            "service v1.DRAPlugin,\n   health service v1.DRAResourceHealth, endpoint "
            "plugins/gpu.gpu-device-plugin.io/dra.sock in the kubelet directory.",
            "2. The pool demo-node (generation 1): 1 ResourceSlice, 8 devices:",
            "3. A pod's claim demo/gpu-claim is allocated gpu-0",
            f"   gpu-0: nvidia.com/gpu={uuid_of('dgx1-v100', 0)}\n",
            "4. GPU 7 reports Xid 79 (fallen off the bus). Its device gets a taint:",
            *fault("gpu-7"),
            "the taint is gone: after ",
            "   The health stream says gpu-7 is healthy again.",
            "   Unprepared gpu-claim: ok.",
            "   Stopped (clean); slices left: 0; sockets left: []",
        ],
    ),
    # MIG: whole GPUs 4-7 come first; the fault hits the GPU with the most MIG devices (GPU 1, seven 1g):
    # every one of them is tainted, and the health stream names them.
    "h100-mig-mixed": (
        "h100-mig-mixed",
        lambda: [
            "2. The pool demo-node (generation 1): 1 ResourceSlice, 19 devices:",
            "   gpu-0-mig-2g20gb-14-0  mig  " + uuid_of("h100-mig-mixed", 0, 0),
            "   ... and 11 more",
            f"   gpu-4: nvidia.com/gpu={uuid_of('h100-mig-mixed', 4)}\n",
            "4. GPU 1 reports Xid 79 (fallen off the bus). Its 7 devices get a taint:",
            *fault("gpu-1-mig-1g10gb-19-0"),
            "   The health stream says gpu-1-mig-1g10gb-19-0 is healthy again.",
            "   Stopped (clean); slices left: 0; sockets left: []",
        ],
    ),
}


@pytest.mark.parametrize(("machine", "expected"), CASES.values(), ids=CASES.keys())
def test_each_step_says_what_happened(
    machine: str, expected: Callable[[], list[str]], capsys: pytest.CaptureFixture[str]
) -> None:
    out = demo(capsys, "--machine", machine)
    assert in_order(out, list(STEPS)) == [], out
    assert in_order(out, expected()) == [], out


@pytest.mark.parametrize("machine", shipped_machine_names())
def test_the_dra_demo_works_on_every_shipped_machine(machine: str, capsys: pytest.CaptureFixture[str]) -> None:
    out = demo(capsys, "--machine", machine)
    one, two, three, four, five, six = STEPS
    lines = [one, two, three, "nvidia.com/gpu=", four, "NoSchedule", "is unhealthy", five, "healthy again", six]
    assert in_order(out, [*lines, "Unprepared gpu-claim: ok."]) == [], out
    assert "Stopped (clean); slices left: 0; sockets left: []" in out


def test_mode_dra_from_the_environment_runs_the_dra_walk_through(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # The demo reads the mode as `run` does: PLUGIN_MODE=dra without --mode is the DRA demo too.
    monkeypatch.setenv("PLUGIN_MODE", "dra")
    assert main(["demo", "--fast", "--machine", "single-gpu"]) == 0
    out = capsys.readouterr().out
    assert in_order(out, list(STEPS)) == [] and "ListAndWatch" not in out


def test_the_in_order_check_catches_a_missing_or_swapped_line() -> None:
    assert in_order("a\nb\nc\n", ["a", "c"]) == []
    assert in_order("a\nb\nc\n", ["c", "a"]) == ["a"]
    assert in_order("a\nb\n", ["a", "x"]) == ["x"]
