"""The recovery action on NVIDIA's NVML mock. The mock (libnvidia-ml.so.550.163.01) cannot state one: its
nvmlDeviceGetFieldValues has no entry for field 230 (NVML_FI_DEV_GET_GPU_RECOVERY_ACTION) and its profiles
and overrides file have no key for one, so the field answers NOT_SUPPORTED even where a profile reports a
565+ driver (gb200: 580, gb300: 570). What it does test is the path of a driver without the field on the real
library: NOT_SUPPORTED is no information, never a failed probe, and an Xid then carries no action, so the
Xid policy decides. The actions themselves are
tested on the fake and the pynvml-shaped stand-in (tests/health/test_recovery_action.py)."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from device_plugin.config.health import HealthConfig
from device_plugin.health.state import HealthCause, HealthStateMachine
from tests.nvml_mock.conftest import eventually
from tests.nvml_mock.remote import MockHost, RemoteBackend

from .test_health_events import next_event, watched

pytestmark = pytest.mark.nvml_mock


@pytest.mark.parametrize("profile", ["a100", "h100", "gb200"], ids=["a100", "h100", "gb200"])
def test_the_mock_driver_reports_no_action_and_every_probe_passes(
    real_on: Callable[..., RemoteBackend], profile: str
) -> None:
    backend = real_on(profile)
    results = [backend.probe(gpu.index) for gpu in backend.gpus()]
    assert [(r.ok, r.recovery_action) for r in results] == [(True, None)] * 8


def test_an_xid_on_the_mock_carries_no_action_and_the_xid_policy_decides(own_host: Callable[[str], MockHost]) -> None:
    host, backend, watch = watched(own_host, "a100")
    host.inject({5: {"failure": {"mode": "ecc_uncorrectable", "xid": {"code": 48}}}})
    eventually(lambda: not backend.probe(5).ok, "GPU 5's probe keeps passing")
    assert backend.probe(5).recovery_action is None
    event = next_event(watch)
    assert (event.xid, event.recovery_action) == (48, None)
    transition = HealthStateMachine(range(8), HealthConfig()).on_event(event, 1.0)
    assert transition is not None and (transition.cause, transition.recovery_action) == (HealthCause.XID, None)
