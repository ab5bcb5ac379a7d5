"""The DRA, plugin-registration and pod-resources stubs: regenerated equal to the committed ones, wire schema as
the kubelet's."""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest

from tests.api.test_generated_stubs import REPO_ROOT, T, _load_generator

PROTOS = ("dra_v1beta1", "dra_v1", "pluginregistration", "dra_health_v1alpha1", "dra_health_v1", "podresources_v1")
GENERATED = [f"{p}{suffix}" for p in PROTOS for suffix in ("_pb2.py", "_pb2_grpc.py", "_pb2.pyi")]


@pytest.fixture(scope="module")
def regenerated(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("proto")
    _load_generator().generate(out)
    return out


@pytest.mark.parametrize("name", GENERATED, ids=GENERATED)
def test_committed_stub_matches_regeneration(regenerated: Path, name: str) -> None:
    committed = (REPO_ROOT / "api" / name).read_text()
    assert committed == (regenerated / "api" / name).read_text(), f"api/{name} is stale: run `make proto`"


# (message, field) -> (number, type, repeated) as the published api.proto files define them.
DRA_FIELDS = {
    ("NodePrepareResourcesRequest", "claims"): (1, T["message"], True),
    ("NodePrepareResourcesResponse", "claims"): (1, T["message"], True),  # map<string, ...>
    ("NodePrepareResourceResponse", "devices"): (1, T["message"], True),
    ("NodePrepareResourceResponse", "error"): (2, T["string"], False),
    ("Device", "request_names"): (1, T["string"], True),
    ("Device", "pool_name"): (2, T["string"], False),
    ("Device", "device_name"): (3, T["string"], False),
    ("Device", "cdi_device_ids"): (4, T["string"], True),
    ("NodeUnprepareResourcesRequest", "claims"): (1, T["message"], True),
    ("NodeUnprepareResourcesResponse", "claims"): (1, T["message"], True),
    ("NodeUnprepareResourceResponse", "error"): (1, T["string"], False),
    ("Claim", "namespace"): (1, T["string"], False),
    ("Claim", "uid"): (2, T["string"], False),
    ("Claim", "name"): (3, T["string"], False),
}
REGISTRATION_FIELDS = {
    ("PluginInfo", "type"): (1, T["string"], False),
    ("PluginInfo", "name"): (2, T["string"], False),
    ("PluginInfo", "endpoint"): (3, T["string"], False),
    ("PluginInfo", "supported_versions"): (4, T["string"], True),
    ("RegistrationStatus", "plugin_registered"): (1, T["bool"], False),
    ("RegistrationStatus", "error"): (2, T["string"], False),
}
# k8s.io/kubelet/pkg/apis/dra-health/{v1alpha1,v1}/api.proto (the same messages in both).
HEALTH_FIELDS = {
    ("DeviceIdentifier", "pool_name"): (1, T["string"], False),
    ("DeviceIdentifier", "device_name"): (2, T["string"], False),
    ("DeviceHealth", "device"): (1, T["message"], False),
    ("DeviceHealth", "health"): (2, T["enum"], False),
    ("DeviceHealth", "last_updated_time"): (3, T["int64"], False),
    ("DeviceHealth", "health_check_timeout_seconds"): (4, T["int64"], False),
    ("DeviceHealth", "message"): (5, T["string"], False),
    ("NodeWatchResourcesResponse", "devices"): (1, T["message"], True),
}
# v1 only: the share a claim holds of a device several claims may hold (consumable capacity, 1.34+)
DRA_V1_FIELDS = {**DRA_FIELDS, ("Device", "share_id"): (5, T["string"], False)}
# The part of the kubelet's pod-resources v1 API that we read (List).
POD_RESOURCES_FIELDS = {
    ("ListPodResourcesResponse", "pod_resources"): (1, T["message"], True),
    ("PodResources", "name"): (1, T["string"], False),
    ("PodResources", "namespace"): (2, T["string"], False),
    ("PodResources", "containers"): (3, T["message"], True),
    ("ContainerResources", "name"): (1, T["string"], False),
    ("ContainerResources", "devices"): (2, T["message"], True),
    ("ContainerResources", "dynamic_resources"): (5, T["message"], True),
    ("ContainerDevices", "resource_name"): (1, T["string"], False),
    ("ContainerDevices", "device_ids"): (2, T["string"], True),
    ("DynamicResource", "claim_name"): (2, T["string"], False),
    ("DynamicResource", "claim_namespace"): (3, T["string"], False),
    ("DynamicResource", "claim_resources"): (4, T["message"], True),
    ("ClaimResource", "cdi_devices"): (1, T["message"], True),
    ("ClaimResource", "driver_name"): (2, T["string"], False),
    ("ClaimResource", "pool_name"): (3, T["string"], False),
    ("ClaimResource", "device_name"): (4, T["string"], False),
    ("ClaimResource", "share_id"): (5, T["string"], False),
    ("CDIDevice", "name"): (1, T["string"], False),
}
SCHEMAS = {
    "dra_v1beta1": DRA_FIELDS,
    "dra_v1": DRA_V1_FIELDS,
    "pluginregistration": REGISTRATION_FIELDS,
    "dra_health_v1alpha1": HEALTH_FIELDS,
    "dra_health_v1": HEALTH_FIELDS,
    "podresources_v1": POD_RESOURCES_FIELDS,
}


@pytest.mark.parametrize("proto", PROTOS, ids=PROTOS)
def test_every_field_has_the_kubelets_number_and_type(proto: str) -> None:
    pb = importlib.import_module(f"api.{proto}_pb2")
    expected = SCHEMAS[proto]
    messages = {m for m in pb.DESCRIPTOR.message_types_by_name.values()}
    declared = {(m.name, f.name) for m in messages for f in m.fields}
    assert declared == set(expected)
    for (message, field), (number, type_, repeated) in expected.items():
        descriptor = pb.DESCRIPTOR.message_types_by_name[message].fields_by_name[field]
        assert (descriptor.number, descriptor.type, descriptor.is_repeated) == (number, type_, repeated)


SERVICES = {
    "dra_v1beta1": (
        "k8s.io.kubelet.pkg.apis.dra.v1beta1.DRAPlugin",
        {"NodePrepareResources", "NodeUnprepareResources"},
    ),
    "dra_v1": ("k8s.io.kubelet.pkg.apis.dra.v1.DRAPlugin", {"NodePrepareResources", "NodeUnprepareResources"}),
    "pluginregistration": ("pluginregistration.Registration", {"GetInfo", "NotifyRegistrationStatus"}),
    "dra_health_v1alpha1": ("v1alpha1.DRAResourceHealth", {"NodeWatchResources"}),
    "dra_health_v1": ("v1.DRAResourceHealth", {"NodeWatchResources"}),
    "podresources_v1": ("v1.PodResourcesLister", {"List"}),
}
SERVER_STREAMING = {"NodeWatchResources"}


@pytest.mark.parametrize("proto", PROTOS, ids=PROTOS)
def test_service_full_name_is_the_one_the_kubelet_calls(proto: str) -> None:
    pb = importlib.import_module(f"api.{proto}_pb2")
    (service,) = pb.DESCRIPTOR.services_by_name.values()
    full_name, methods = SERVICES[proto]
    assert service.full_name == full_name
    assert {m.name for m in service.methods} == methods
    assert not any(m.client_streaming for m in service.methods)
    assert {m.name for m in service.methods if m.server_streaming} == methods & SERVER_STREAMING


@pytest.mark.parametrize("proto", ["dra_health_v1alpha1", "dra_health_v1"])
def test_health_status_values_are_the_kubelets(proto: str) -> None:
    pb = importlib.import_module(f"api.{proto}_pb2")
    values = {v.name: v.number for v in pb.DESCRIPTOR.enum_types_by_name["HealthStatus"].values}
    assert values == {"UNKNOWN": 0, "HEALTHY": 1, "UNHEALTHY": 2}
