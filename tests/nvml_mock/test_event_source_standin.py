"""What the NVML mock showed about event sources (test_health_events.py), on the pynvml-shaped stand-in so that it
holds where the mock is absent: a lost GPU answers GPU_IS_LOST to its UUID query too, and its own Xid 79 must
still come out of the event watch as that GPU's event, not as a failed wait."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from device_plugin.nvml.fake.machine import FakeNvml
from device_plugin.nvml.health_types import HealthEvent, HealthEventKind
from device_plugin.nvml.real.backend import RealNvml
from tests.health.real_standin import NO_INSTANCE, NVML_ERROR_GPU_IS_LOST, XID_CRITICAL, HealthStandin
from tests.nvml.nvml_standin import NVMLError


class LostAnswersNothing(HealthStandin):
    """As a driver does for a GPU off the bus: every query of it fails, its UUID included."""

    uuid_queries = 0

    def nvmlDeviceGetUUID(self, handle: int) -> bytes:
        self.uuid_queries += 1
        if self.faults[handle].lost:
            raise NVMLError(NVML_ERROR_GPU_IS_LOST)
        return super().nvmlDeviceGetUUID(handle)


@pytest.fixture
def standin(tmp_path: Path) -> LostAnswersNothing:
    library = LostAnswersNothing(FakeNvml.from_machine("dgx1-v100"))
    library.write_sysfs(tmp_path)
    return library


def test_a_lost_gpus_xid_is_its_event_without_asking_it_anything(standin: LostAnswersNothing, tmp_path: Path) -> None:
    watch = RealNvml(tmp_path, library=standin).open_event_watch((2, 3))
    queries = standin.uuid_queries
    standin.faults[3].lost = True
    standin.emit(3, XID_CRITICAL, 79)
    assert watch.wait(5.0) == HealthEvent(3, HealthEventKind.XID, xid=79)
    assert standin.uuid_queries == queries


def test_an_event_from_a_handle_never_registered_is_named_by_uuid_and_dropped(
    standin: LostAnswersNothing, tmp_path: Path
) -> None:
    watch = RealNvml(tmp_path, library=standin).open_event_watch((2,))
    event = SimpleNamespace(device=6, eventType=XID_CRITICAL, eventData=79, gpuInstanceId=NO_INSTANCE)
    standin.sets[-1].events.put(event)
    assert watch.wait(5.0) is None
    assert standin.uuid_queries == 2  # one at registration, one for the stray event
