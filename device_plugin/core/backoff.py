"""Exponential backoff, written once: the schedule of delays a retry loop waits between failed
attempts.

Users: the kubelet lifecycle (Register and failed serving generations, kubelet/), the health watcher
(reopening a failed NVML event watch, health/watcher.py) and the DRA slice publisher and its watch
(API server outages, dra_helper/api/publisher.py and slice_watch.py). Each owns a `BackoffDelays`
for one run of failures and resets it after a success. Pure arithmetic: no clock, no sleeping; the
caller waits.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Backoff:
    """Delays initial_s, initial_s * factor, ... capped at max_s."""

    initial_s: float = 0.2
    factor: float = 2.0
    max_s: float = 10.0

    def delays_s(self) -> BackoffDelays:
        """A fresh schedule, starting at initial_s."""
        return BackoffDelays(self)


class BackoffDelays:
    """One retry loop's schedule: next() is the delay before the next attempt; reset() after a
    success."""

    def __init__(self, backoff: Backoff) -> None:
        self._backoff = backoff
        self._next_s = backoff.initial_s

    def __next__(self) -> float:
        delay_s = self._next_s
        self._next_s = min(self._next_s * self._backoff.factor, self._backoff.max_s)
        return delay_s

    def __iter__(self) -> BackoffDelays:
        return self

    def reset(self) -> None:
        self._next_s = self._backoff.initial_s
