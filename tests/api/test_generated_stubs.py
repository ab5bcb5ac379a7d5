"""The committed stubs are exactly what `make proto` generates, and the wire schema is the kubelet's."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
GENERATED = ["deviceplugin_pb2.py", "deviceplugin_pb2_grpc.py", "deviceplugin_pb2.pyi"]


def _load_generator():
    spec = importlib.util.spec_from_file_location("gen_proto", REPO_ROOT / "tools" / "gen_proto.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules["gen_proto"] = module
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("name", GENERATED, ids=GENERATED)
def test_committed_stub_matches_regeneration(tmp_path: Path, name: str) -> None:
    _load_generator().generate(tmp_path)
    fresh = (tmp_path / "api" / name).read_text()
    committed = (REPO_ROOT / "api" / name).read_text()
    assert committed == fresh, f"api/{name} is stale: run `make proto` and commit the result"


# (message, field) -> (number, type, label) as the kubelet's v1beta1 api.proto defines them.
T = {"string": 9, "bool": 8, "int32": 5, "int64": 3, "message": 11, "enum": 14}
OPT, REP = 1, 3
WIRE_FIELDS = {
    ("DevicePluginOptions", "pre_start_required"): (1, T["bool"], OPT),
    ("DevicePluginOptions", "get_preferred_allocation_available"): (2, T["bool"], OPT),
    ("RegisterRequest", "version"): (1, T["string"], OPT),
    ("RegisterRequest", "endpoint"): (2, T["string"], OPT),
    ("RegisterRequest", "resource_name"): (3, T["string"], OPT),
    ("RegisterRequest", "options"): (4, T["message"], OPT),
    ("ListAndWatchResponse", "devices"): (1, T["message"], REP),
    ("TopologyInfo", "nodes"): (1, T["message"], REP),
    ("NUMANode", "ID"): (1, T["int64"], OPT),
    ("Device", "ID"): (1, T["string"], OPT),
    ("Device", "health"): (2, T["string"], OPT),
    ("Device", "topology"): (3, T["message"], OPT),
    ("PreStartContainerRequest", "devices_ids"): (1, T["string"], REP),
    ("PreferredAllocationRequest", "container_requests"): (1, T["message"], REP),
    ("ContainerPreferredAllocationRequest", "available_deviceIDs"): (1, T["string"], REP),
    ("ContainerPreferredAllocationRequest", "must_include_deviceIDs"): (2, T["string"], REP),
    ("ContainerPreferredAllocationRequest", "allocation_size"): (3, T["int32"], OPT),
    ("PreferredAllocationResponse", "container_responses"): (1, T["message"], REP),
    ("ContainerPreferredAllocationResponse", "deviceIDs"): (1, T["string"], REP),
    ("AllocateRequest", "container_requests"): (1, T["message"], REP),
    ("ContainerAllocateRequest", "devices_ids"): (1, T["string"], REP),
    ("CDIDevice", "name"): (1, T["string"], OPT),
    ("AllocateResponse", "container_responses"): (1, T["message"], REP),
    ("ContainerAllocateResponse", "envs"): (1, T["message"], REP),  # map<string,string>
    ("ContainerAllocateResponse", "mounts"): (2, T["message"], REP),
    ("ContainerAllocateResponse", "devices"): (3, T["message"], REP),
    ("ContainerAllocateResponse", "annotations"): (4, T["message"], REP),  # map<string,string>
    ("ContainerAllocateResponse", "cdi_devices"): (5, T["message"], REP),
    ("Mount", "container_path"): (1, T["string"], OPT),
    ("Mount", "host_path"): (2, T["string"], OPT),
    ("Mount", "read_only"): (3, T["bool"], OPT),
    ("DeviceSpec", "container_path"): (1, T["string"], OPT),
    ("DeviceSpec", "host_path"): (2, T["string"], OPT),
    ("DeviceSpec", "permissions"): (3, T["string"], OPT),
}


@pytest.mark.parametrize("key", sorted(WIRE_FIELDS), ids=[f"{m}.{f}" for m, f in sorted(WIRE_FIELDS)])
def test_wire_field_matches_kubelet_proto(key: tuple[str, str]) -> None:
    from api import deviceplugin_pb2 as pb

    message, field_name = key
    descriptor = pb.DESCRIPTOR.message_types_by_name[message].fields_by_name[field_name]
    number, type_, label = WIRE_FIELDS[key]
    assert (descriptor.number, descriptor.type) == (number, type_)
    assert descriptor.is_repeated == (label == REP)


def test_every_message_field_is_pinned() -> None:
    from api import deviceplugin_pb2 as pb

    declared = {(m.name, f.name) for m in pb.DESCRIPTOR.message_types_by_name.values() for f in m.fields}
    assert declared == set(WIRE_FIELDS)


SERVICES = {
    "v1beta1.Registration": {"Register": (False, False)},
    "v1beta1.DevicePlugin": {
        "GetDevicePluginOptions": (False, False),
        "ListAndWatch": (False, True),
        "GetPreferredAllocation": (False, False),
        "Allocate": (False, False),
        "PreStartContainer": (False, False),
    },
}


@pytest.mark.parametrize("service", sorted(SERVICES), ids=sorted(SERVICES))
def test_service_methods_and_streaming(service: str) -> None:
    from api import deviceplugin_pb2 as pb

    descriptor = pb.DESCRIPTOR.services_by_name[service.split(".")[1]]
    assert descriptor.full_name == service
    methods = {m.name: (m.client_streaming, m.server_streaming) for m in descriptor.methods}
    assert methods == SERVICES[service]
