"""Replica IDs "<id>::<n>": formatted and parsed by device_plugin.core.ids, carried by replica_devices."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from device_plugin.core.devices import Device, Health
from device_plugin.core.ids import DeviceId, format_replica_id, parse_device_id
from device_plugin.timeslice.replicas import replica_devices

# Base IDs as NVML produces them never contain ':' ("GPU-<uuid>", "MIG-<uuid>", legacy "MIG-GPU-<uuid>/gi/ci").
bases = st.text(alphabet=st.characters(blacklist_characters=":", blacklist_categories=("Cs",)), min_size=1)


@given(base=bases, replica=st.integers(min_value=0, max_value=10**6))
def test_replica_id_round_trips(base: str, replica: int) -> None:
    text = format_replica_id(base, replica)
    assert parse_device_id(text) == DeviceId(base, replica)
    assert str(parse_device_id(text)) == text


@given(base=bases)
def test_whole_device_id_round_trips(base: str) -> None:
    assert parse_device_id(base) == DeviceId(base, None)


def test_replicas_carry_gpu_numa_and_health() -> None:
    base = Device("GPU-aaaa", (3,), 1, Health.UNHEALTHY, "xid 79")
    replicas = replica_devices(base, 3)
    assert [r.id for r in replicas] == ["GPU-aaaa::0", "GPU-aaaa::1", "GPU-aaaa::2"]
    assert {(r.gpu_indices, r.numa_node, r.health, r.health_reason) for r in replicas} == {
        ((3,), 1, Health.UNHEALTHY, "xid 79")
    }
    assert all(parse_device_id(r.id).base == "GPU-aaaa" for r in replicas)


@pytest.mark.parametrize(
    "bad_id", ["GPU-aaaa::1", "GPU-aaaa:"], ids=["already-a-replica", "trailing-colon-would-not-parse"]
)
def test_ids_that_cannot_round_trip_are_refused(bad_id: str) -> None:
    with pytest.raises(ValueError, match="round-trip"):
        replica_devices(Device(bad_id, (0,), 0), 2)
