"""Opaque configs addressed to our driver in a claim's allocation: accepted when they ask for nothing the
driver does not do (NVIDIA's GpuConfig on whole GPUs, MigDeviceConfig on MIG devices, without `sharing`),
refused otherwise with a per-claim error naming the config; other drivers' configs are not ours to judge.
Over the real gRPC socket, on the h100-mig-mixed machine (whole GPUs and MIG devices)."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from device_plugin.dra_helper.checkpoint.store import Checkpoint
from device_plugin.dra_helper.service.grpc_service import DraGrpcServer
from device_plugin.dra_helper.service.socket_paths import SocketPaths
from tests.adversarial.dra.harness import DRIVER, NODE, Devices, HeldClaims, dra_server, machine_uuids, prepare

NVIDIA = "resource.nvidia.com/v1beta1"
GPU, MIG = "gpu-4", "gpu-0-mig-3g40gb-9-4"  # a whole GPU and a MIG device of h100-mig-mixed
assert GPU in machine_uuids("h100-mig-mixed") and MIG in machine_uuids("h100-mig-mixed")


def config(
    parameters: Any, *, driver: str = DRIVER, requests: list[str] | None = None, source: str = "FromClaim"
) -> dict:
    item: dict[str, Any] = {"source": source, "opaque": {"driver": driver, "parameters": parameters}}
    if requests is not None:
        item["requests"] = requests
    return item


def gpu_config(**fields: Any) -> dict[str, Any]:
    return {"apiVersion": NVIDIA, "kind": "GpuConfig", **fields}


def mig_config(**fields: Any) -> dict[str, Any]:
    return {"apiVersion": NVIDIA, "kind": "MigDeviceConfig", **fields}


# (request -> device) allocated, the configs, and "" (prepared) or what the error must say
CASES = {
    "gpu-config-without-sharing-on-a-gpu": ({"gpus": GPU}, [config(gpu_config())], ""),
    "mig-config-on-a-mig-device": ({"mig": MIG}, [config(mig_config())], ""),
    "from-class-too": ({"gpus": GPU}, [config(gpu_config(), source="FromClass")], ""),
    "another-drivers-config-is-not-ours": ({"gpus": GPU}, [config({"anything": 1}, driver="nic.example.com")], ""),
    "a-config-for-a-request-of-another-driver": ({"gpus": GPU}, [config(gpu_config(sharing={}), requests=["nic"])], ""),
    "scoped-to-the-mig-request": ({"gpus": GPU, "mig": MIG}, [config(mig_config(), requests=["mig"])], ""),
    "subrequest-names-its-request": ({"gpus": GPU}, [config(gpu_config(), requests=["gpus/ranked-a"])], ""),
    "time-slicing-refused": (
        {"gpus": GPU},
        [config(gpu_config(sharing={"strategy": "TimeSlicing", "timeSlicingConfig": {"interval": "Long"}}))],
        "config status.allocation.devices.config[0] (FromClaim, 'resource.nvidia.com/v1beta1' 'GpuConfig'): "
        "sharing (strategy 'TimeSlicing') is not supported",
    ),
    "time-slicing-default-refused-too": (
        {"gpus": GPU},
        [config(gpu_config(sharing={"strategy": "TimeSlicing", "timeSlicingConfig": {"interval": "Default"}}))],
        "this driver sets no GPU time-slice",
    ),
    "mps-refused": (
        {"mig": MIG},
        [config(mig_config(sharing={"strategy": "MPS"}))],
        "a share's MPS limits are the node's",
    ),
    "gpu-config-on-a-mig-device": (
        {"mig": MIG},
        [config(gpu_config())],
        "applies to gpu devices, but its requests got mig devices",
    ),
    "unscoped-config-on-both-types": (
        {"gpus": GPU, "mig": MIG},
        [config(gpu_config())],
        "applies to gpu devices, but its requests got mig devices",
    ),
    "unknown-kind": (
        {"gpus": GPU},
        [config({"apiVersion": NVIDIA, "kind": "ComputeDomainChannelConfig"})],
        "not a kind this driver knows (accepted: resource.nvidia.com/v1beta1 GpuConfig, "
        "resource.nvidia.com/v1beta1 MigDeviceConfig)",
    ),
    "unknown-api-version": ({"gpus": GPU}, [config({"apiVersion": "v1", "kind": "GpuConfig"})], "not a kind"),
    "unknown-field": ({"gpus": GPU}, [config(gpu_config(timeSlice="Long"))], "unknown fields 'timeSlice'"),
    "the-second-config-is-named": (
        {"gpus": GPU},
        [config(gpu_config()), config(gpu_config(sharing={"strategy": "MPS"}), source="FromClass")],
        "config status.allocation.devices.config[1] (FromClass,",
    ),
}


@pytest.fixture
def root() -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="dra-", dir="/tmp"))  # short: unix socket paths hold 107 bytes
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def claims() -> HeldClaims:
    return HeldClaims()


@pytest.fixture
def server(root: Path, claims: HeldClaims) -> Iterator[DraGrpcServer]:
    started = dra_server(root, reader=claims, devices=Devices(uuids=machine_uuids("h100-mig-mixed")))
    started.start()
    yield started
    started.stop(0.1)


def add_claim(claims: HeldClaims, allocated: dict[str, str], configs: list[dict]) -> tuple[str, str, str]:
    results = [{"request": r, "driver": DRIVER, "pool": NODE, "device": d} for r, d in allocated.items()]
    claims.claims[("ns", "c")] = {
        "metadata": {"namespace": "ns", "name": "c", "uid": "uid-c"},
        "status": {"allocation": {"devices": {"results": results, "config": configs}}},
    }
    return ("ns", "uid-c", "c")


@pytest.mark.parametrize(("allocated", "configs", "expected"), list(CASES.values()), ids=list(CASES))
def test_a_config_for_our_driver_is_accepted_or_refused_naming_it(
    root: Path, claims: HeldClaims, server: DraGrpcServer, allocated: dict, configs: list, expected: str
) -> None:
    other = claims.add("other", "uid-other", "gpu-5")  # the same call's other claim is never held back
    answer = prepare(SocketPaths.for_driver(DRIVER, root).endpoint, [add_claim(claims, allocated, configs), other])
    result = answer.claims["uid-c"]
    checkpointed = Checkpoint(root / "plugins" / DRIVER / "checkpoint.json").uids()
    if expected:
        assert result.error.startswith("claim ns/c (uid-c): ") and expected in result.error
        assert not result.devices and checkpointed == ("uid-other",)
    else:
        assert result.error == ""
        assert sorted(d.device_name for d in result.devices) == sorted(allocated.values())
        assert set(checkpointed) == {"uid-c", "uid-other"}
    assert answer.claims["uid-other"].error == ""
