"""The one exponential backoff (core/backoff.py): the schedule, its cap, and a reset after a success."""

from __future__ import annotations

from itertools import islice

import pytest

from device_plugin.core.backoff import Backoff


@pytest.mark.parametrize(
    ("backoff", "expected_s"),
    [
        (Backoff(), [0.2, 0.4, 0.8, 1.6, 3.2, 6.4, 10.0, 10.0]),
        (Backoff(initial_s=0.5, max_s=30.0), [0.5, 1.0, 2.0, 4.0, 8.0, 16.0, 30.0, 30.0]),
        (Backoff(initial_s=1.0, factor=3.0, max_s=20.0), [1.0, 3.0, 9.0, 20.0, 20.0, 20.0, 20.0, 20.0]),
        (Backoff(initial_s=2.0, max_s=2.0), [2.0] * 8),
        (Backoff(initial_s=1.0, factor=1.0, max_s=5.0), [1.0] * 8),
    ],
    ids=["lifecycle default", "health watcher default", "factor three", "initial at the cap", "constant"],
)
def test_delays_grow_by_the_factor_up_to_the_cap(backoff: Backoff, expected_s: list[float]) -> None:
    assert list(islice(backoff.delays_s(), 8)) == pytest.approx(expected_s)


def test_a_reset_after_a_success_starts_again_at_the_first_delay() -> None:
    delays = Backoff(initial_s=0.1, max_s=5.0).delays_s()
    assert [next(delays) for _ in range(3)] == pytest.approx([0.1, 0.2, 0.4])
    delays.reset()
    assert [next(delays) for _ in range(2)] == pytest.approx([0.1, 0.2])


def test_each_retry_loop_gets_its_own_schedule() -> None:
    backoff = Backoff(initial_s=0.1, max_s=5.0)
    first, second = backoff.delays_s(), backoff.delays_s()
    next(first), next(first)
    assert next(second) == pytest.approx(0.1) and next(first) == pytest.approx(0.4)
