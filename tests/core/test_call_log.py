"""One INFO line per kubelet call, rate-limited (core/call_log.py): a burst goes out, a storm is counted."""

from __future__ import annotations

import logging

import pytest

from device_plugin.core.call_log import CallLog


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


@pytest.mark.parametrize(
    ("calls", "spacing_s", "written"),
    [(5, 0.0, 5), (20, 0.0, 20), (100, 0.0, 20), (100, 0.2, 100), (100, 0.1, 69)],
    ids=[
        "a-few",
        "a-full-burst",
        "a-storm-is-held-to-the-burst",
        "five-a-second-all-go",
        "ten-a-second-the-burst-then-five-a-second",
    ],
)
def test_lines_written_for_a_stream_of_calls(
    caplog: pytest.LogCaptureFixture, calls: int, spacing_s: float, written: int
) -> None:
    clock = Clock()
    calls_log = CallLog(logging.getLogger("test.calls"), burst=20, per_s=5.0, clock=clock)
    with caplog.at_level(logging.INFO, logger="test.calls"):
        for n in range(calls):
            calls_log.info("Allocate %d", n)
            clock.now += spacing_s
    assert len(caplog.records) == pytest.approx(written, abs=1)


def test_the_next_line_out_says_how_many_were_held_back(caplog: pytest.LogCaptureFixture) -> None:
    clock = Clock()
    calls_log = CallLog(logging.getLogger("test.held"), burst=2, per_s=1.0, clock=clock)
    with caplog.at_level(logging.INFO, logger="test.held"):
        for n in range(7):
            calls_log.info("call %d", n)
        assert calls_log.held_back == 5
        clock.now += 1.0
        assert calls_log.info("call %d", 7)
    last = caplog.records[-1].getMessage()
    assert last.startswith("call 7 (5 such lines held back over the last 1.0 s)")
    assert calls_log.held_back == 0


def test_nothing_is_counted_when_info_is_off(caplog: pytest.LogCaptureFixture) -> None:
    logger = logging.getLogger("test.quiet")
    calls_log = CallLog(logger, burst=1, per_s=0.001, clock=Clock())
    with caplog.at_level(logging.WARNING, logger="test.quiet"):
        for _ in range(10):
            assert not calls_log.info("x")
    assert calls_log.held_back == 0 and not caplog.records
