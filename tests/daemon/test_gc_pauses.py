"""Start-up objects are frozen out of full garbage collections once the daemon serves (process/gc_pauses)."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest

from device_plugin.process.gc_pauses import freeze_start_up_objects


@pytest.fixture
def unfrozen_after() -> Iterator[None]:
    yield
    gc.unfreeze()  # give the test process its collector back as it was


def test_what_start_up_built_is_frozen_and_later_objects_are_still_collected(unfrozen_after: None) -> None:
    built_at_start_up = [[i] for i in range(10_000)]
    frozen = freeze_start_up_objects()
    assert frozen == gc.get_freeze_count() and frozen >= len(built_at_start_up)

    class Cycle:
        def __init__(self) -> None:
            self.me = self

    Cycle()  # garbage made after the freeze: a reference cycle only the collector can free
    assert gc.collect() >= 1
