"""The hint thread: wakes coalesce, a failing recomputation leaves it running, stop() ends it; the decision
wakes it only when other devices are held."""

from __future__ import annotations

import threading

from device_plugin.dra.hint_thread import HintThread
from device_plugin.dra.prepare_decision import PrepareDecision
from testbed.dra_node import eventually


def test_a_burst_of_wakes_during_one_recomputation_costs_one_more_not_one_each() -> None:
    runs: list[int] = []
    gate = threading.Event()

    def recompute() -> None:
        runs.append(len(runs))
        gate.wait(5.0)

    hints = HintThread(recompute)
    hints.start()
    try:
        hints.wake()
        assert eventually(lambda: len(runs) == 1)
        for _ in range(50):  # told while the first recomputation runs
            hints.wake()
        gate.set()
        assert eventually(lambda: len(runs) == 2)
        assert not eventually(lambda: len(runs) > 2, timeout_s=0.3)
    finally:
        hints.stop()
    assert not hints.running()


def test_a_recomputation_that_raises_is_logged_and_the_next_wake_runs_again() -> None:
    calls: list[int] = []

    def recompute() -> None:
        calls.append(1)
        if len(calls) == 1:
            raise RuntimeError("the allocator failed")

    hints = HintThread(recompute)
    hints.start()
    try:
        hints.wake()
        assert eventually(lambda: len(calls) == 1)
        assert hints.running()
        hints.wake()
        assert eventually(lambda: len(calls) == 2)
    finally:
        hints.stop()


def test_the_decision_wakes_the_hints_only_when_other_devices_are_held_and_drops_a_late_snapshot() -> None:
    wakes: list[int] = []
    decision = PrepareDecision(driver_name="d", pool_name="p", on_held=lambda: wakes.append(1))
    decision.held(1, frozenset({"gpu-0"}), {})
    decision.held(2, frozenset({"gpu-0"}), {})  # e.g. an adminAccess claim prepared: the same devices held
    decision.held(4, frozenset({"gpu-0", "gpu-1"}), {})
    decision.held(3, frozenset(), {})  # told after snapshot 4: stale
    assert len(wakes) == 2 and decision.holdings() == frozenset({"gpu-0", "gpu-1"})
