"""The ResourceClaim the scheduler creates for a Pod that asks for an extended resource served by DRA (KEP-5004).

Written from Kubernetes' scheduler (dynamicresources plugin, createDeviceRequests) so the tests prepare
what a real cluster would send: one claim per Pod, `generateName: <pod>-extended-resources-`, annotated
`resource.kubernetes.io/extended-resource-claim: "true"`, owned by the Pod, with one request per container
and extended resource, named `container-<i>-request-<j>`: i the container's index in initContainers then
containers, j the resource's index in the container's sorted resource names (requests, which default to
the limits). Each request is `exactly` ExactCount of the DeviceClass that names the resource. The kubelet
maps requests back to containers from the Pod's status.extendedResourceClaimStatus, not from these names.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

ANNOTATION = "resource.kubernetes.io/extended-resource-claim"


def container_requests(pod: Mapping[str, Any], resource: str) -> list[tuple[str, str, int]]:
    """(container name, request name, count) for every container of `pod` that asks for `resource`."""
    spec = pod["spec"]
    containers = [*spec.get("initContainers", []), *spec["containers"]]
    found = []
    for index, container in enumerate(containers):
        resources = container.get("resources", {})
        asked = {**resources.get("limits", {}), **resources.get("requests", {})}  # requests default to limits
        if resource in asked:
            position = sorted(asked).index(resource)
            found.append((container["name"], f"container-{index}-request-{position}", int(asked[resource])))
    return found


def scheduler_claim(
    pod: Mapping[str, Any],
    pod_uid: str,
    claim_uid: str,
    device_class: str,
    resource: str,
    allocated: Mapping[str, Sequence[tuple[str, str, str]]],
) -> dict[str, Any]:
    """The claim as the scheduler writes it once allocated: `allocated[request]` = (driver, pool, device)s."""
    meta = pod["metadata"]
    requests = container_requests(pod, resource)
    results = [
        {"request": request, "driver": driver, "pool": pool, "device": device}
        for _, request, _ in requests
        for driver, pool, device in allocated[request]
    ]
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {
            "name": f"{meta['name']}-extended-resources-x7k2q",  # generateName's random suffix
            "namespace": meta["namespace"],
            "uid": claim_uid,
            "annotations": {ANNOTATION: "true"},
            "ownerReferences": [
                {
                    "apiVersion": "v1",
                    "kind": "Pod",
                    "name": meta["name"],
                    "uid": pod_uid,
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
        },
        "spec": {
            "devices": {
                "requests": [
                    {
                        "name": request,
                        "exactly": {"deviceClassName": device_class, "allocationMode": "ExactCount", "count": count},
                    }
                    for _, request, count in requests
                ]
            }
        },
        "status": {
            "allocation": {"devices": {"results": results}},
            "reservedFor": [{"resource": "pods", "name": meta["name"], "uid": pod_uid}],
        },
    }
