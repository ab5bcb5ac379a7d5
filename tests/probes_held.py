"""Probes of the fake held while a test's injected event is read, so the event path decides, every time.

A sticky fault (Xid 79: the GPU fell off the bus) is seen twice: by the event watch and by the next
probe ("GPU is lost"). Whichever the watcher hears first is why the GPU is Unhealthy, and on a loaded
machine the probe (every 0.02 s in tests) sometimes wins. That race is real and the product handles it
(the reason then names the probe); a test about what the Xid itself does holds the probes until the
watcher has taken the event, instead of hoping the event thread runs first.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

from device_plugin.nvml.fake.machine import FakeNvml
from device_plugin.nvml.health_types import ProbeResult

HOLD_S = 30.0  # a bound, should the test never release: a held probe then goes on


@contextmanager
def probes_held(fake: FakeNvml) -> Iterator[None]:
    """Probes of `fake` wait until the block ends (the test waits for the event's effect inside it)."""
    release = threading.Event()
    probe = fake.probe

    def held(index: int) -> ProbeResult:
        release.wait(HOLD_S)
        return probe(index)

    fake.probe = held  # type: ignore[method-assign]  # the watcher calls its source's probe
    try:
        yield
    finally:
        release.set()
        del fake.probe
