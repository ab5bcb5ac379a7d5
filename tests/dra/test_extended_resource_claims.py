"""`nvidia.com/gpu: N` served through DRA (KEP-5004): the claims the scheduler creates for such Pods are
prepared over the real gRPC sockets, read from the API stand-in, each GPU answered under the request of
the container that asked for it. The Pods are the shipped examples (deploy/dra/examples/gpu-count) and
variants of them (init containers, other resources, another driver's extended resource)."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest

from device_plugin.core.names import GPU_RESOURCE
from testbed.dra_node import DRIVER, NODE, Node, node  # noqa: F401 - `node` is the fixture
from tests.deploy.kustomize import build as render
from tests.dra.scheduler_claims import container_requests, scheduler_claim

DEPLOY_DRA = Path(__file__).resolve().parents[2] / "deploy" / "dra"
COUNT_PODS = {o["metadata"]["name"]: o for o in render(DEPLOY_DRA / "examples" / "gpu-count") if o["kind"] == "Pod"}
(GPU_CLASS,) = [
    o["metadata"]["name"]
    for o in render(DEPLOY_DRA / "extended-resource")
    if o["kind"] == "DeviceClass" and o["spec"].get("extendedResourceName") == GPU_RESOURCE
]
OTHER_DRIVER = "nic.example.com"


def with_init_container(pod: dict[str, Any]) -> dict[str, Any]:
    """The example's Pod with an init container that asks for one GPU of its own (index 0 is the init one)."""
    pod = copy.deepcopy(pod)
    first = pod["spec"]["containers"][0]
    pod["spec"]["initContainers"] = [{**first, "name": "warm-up", "resources": {"limits": {GPU_RESOURCE: 1}}}]
    return pod


def with_cpu_and_memory(pod: dict[str, Any]) -> dict[str, Any]:
    """The example's Pod whose container also requests cpu and memory: the GPU is its 3rd sorted name."""
    pod = copy.deepcopy(pod)
    pod["spec"]["containers"][0]["resources"]["requests"] = {"cpu": "1", "memory": "1Gi"}
    return pod


def with_another_drivers_resource(pod: dict[str, Any]) -> dict[str, Any]:
    """The example's Pod also asking for `example.com/nic: 1`, served by another DRA driver."""
    pod = copy.deepcopy(pod)
    pod["spec"]["containers"][0]["resources"]["limits"]["example.com/nic"] = 1
    return pod


CASES = [
    ("two-gpus-one-container", COUNT_PODS["two-gpus-by-count"], {"cuda": "container-0-request-0"}),
    (
        "one-gpu-per-container",
        COUNT_PODS["one-gpu-per-container"],
        {"first": "container-0-request-0", "second": "container-1-request-0"},
    ),
    (
        "init-container-counts-first",
        with_init_container(COUNT_PODS["two-gpus-by-count"]),
        {"warm-up": "container-0-request-0", "cuda": "container-1-request-0"},
    ),
    (
        "gpu-after-cpu-and-memory",
        with_cpu_and_memory(COUNT_PODS["two-gpus-by-count"]),
        {"cuda": "container-0-request-2"},
    ),
]


@pytest.mark.parametrize(("pod", "names"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_the_scheduler_names_one_request_per_container_as_kubernetes_does(pod: dict, names: dict) -> None:
    assert {container: request for container, request, _ in container_requests(pod, GPU_RESOURCE)} == names


@pytest.mark.parametrize("version", ["1.34", "1.35", "1.36", "1.37"])
@pytest.mark.parametrize(("pod", "names"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_the_claims_built_for_the_tests_are_valid_resource_claims(pod: dict, names: dict, version: str) -> None:
    gpus = iter(f"gpu-{i}" for i in range(8))
    allocated = {r: [(DRIVER, NODE, next(gpus)) for _ in range(n)] for _, r, n in container_requests(pod, GPU_RESOURCE)}
    claim = scheduler_claim(pod, "pod-uid", "claim-uid", GPU_CLASS, GPU_RESOURCE, allocated)
    kubernetes_validate.validate(claim, version, strict=True)


@pytest.mark.parametrize(("pod", "names"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_a_count_pods_claim_is_prepared_with_each_gpu_under_its_containers_request(
    node: Node,  # noqa: F811 - the fixture
    pod: dict,
    names: dict,
) -> None:
    driver = node.start()
    assert driver.publisher.wait_synced(10.0)
    free = iter(node.published())  # the pool in listing order, as the allocator takes it
    requests = container_requests(pod, GPU_RESOURCE)
    allocated = {request: [(DRIVER, NODE, next(free)) for _ in range(count)] for _, request, count in requests}
    claim = scheduler_claim(pod, "pod-uid", "claim-uid", GPU_CLASS, GPU_RESOURCE, allocated)
    meta = claim["metadata"]
    node.api.claims[(meta["namespace"], meta["name"])] = claim
    kubelet = node.kubelet()
    plugin = kubelet.wait_for_plugin()
    ref = (meta["namespace"], meta["uid"], meta["name"])
    answer = kubelet.prepare(plugin, [ref])["claim-uid"]
    assert answer.error == ""
    got = {d.device_name: list(d.request_names) for d in answer.devices}
    assert got == {device: [request] for request, picked in allocated.items() for _, _, device in picked}
    published = [d for s in node.api.pool(DRIVER, NODE) for d in s["spec"]["devices"]]
    uuids = {d["name"]: d["attributes"]["uuid"]["string"] for d in published}
    assert {d.device_name: list(d.cdi_device_ids) for d in answer.devices} == {
        name: [f"nvidia.com/gpu={uuids[name]}"] for name in got
    }
    assert kubelet.unprepare(plugin, [ref]) == {"claim-uid": ""}


def test_a_count_pods_claim_with_another_drivers_resource_answers_only_our_gpus(node: Node) -> None:  # noqa: F811
    pod = with_another_drivers_resource(COUNT_PODS["two-gpus-by-count"])
    node.start()
    kubelet = node.kubelet()
    plugin = kubelet.wait_for_plugin()
    (gpus,) = container_requests(pod, GPU_RESOURCE)
    (nics,) = container_requests(pod, "example.com/nic")
    allocated = {gpus[1]: [(DRIVER, NODE, "gpu-0"), (DRIVER, NODE, "gpu-3")]}
    claim = scheduler_claim(pod, "pod-uid", "claim-uid", GPU_CLASS, GPU_RESOURCE, allocated)
    # the scheduler's claim holds both resources' requests and results; the other driver prepares its own
    claim["spec"]["devices"]["requests"].append(
        {"name": nics[1], "exactly": {"deviceClassName": "nic.example.com", "allocationMode": "ExactCount", "count": 1}}
    )
    claim["status"]["allocation"]["devices"]["results"].append(
        {"request": nics[1], "driver": OTHER_DRIVER, "pool": NODE, "device": "nic-0"}
    )
    kubernetes_validate.validate(claim, "1.36", strict=True)
    meta = claim["metadata"]
    node.api.claims[(meta["namespace"], meta["name"])] = claim
    answer = kubelet.prepare(plugin, [(meta["namespace"], meta["uid"], meta["name"])])["claim-uid"]
    assert (gpus[1], nics[1]) == ("container-0-request-1", "container-0-request-0")  # sorted: example.com < nvidia
    assert answer.error == "" and [(d.device_name, list(d.request_names)) for d in answer.devices] == [
        ("gpu-0", [gpus[1]]),
        ("gpu-3", [gpus[1]]),
    ]
