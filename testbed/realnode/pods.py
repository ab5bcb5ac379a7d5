"""Pods for the real node: busybox containers that print what they were given, with GPUs by count or by claim."""

from __future__ import annotations

import json
from typing import Any

from testbed.realnode.cluster import RealCluster
from testbed.realnode.images import BUSYBOX_IMAGE


def busybox_pod(
    name: str,
    namespace: str,
    command: str,
    *,
    limits: dict[str, int] | None = None,
    claims: dict[str, str] | None = None,
    restart_never: bool = True,
) -> dict[str, Any]:
    """A pod running `sh -c command`; `limits` asks resources by count, `claims` maps a pod claim name to
    the ResourceClaimTemplate it is made from."""
    container: dict[str, Any] = {
        "name": "main",
        "image": BUSYBOX_IMAGE,
        "imagePullPolicy": "Never",
        "command": ["sh", "-c", command],
    }
    if limits:
        container["resources"] = {"limits": {k: str(v) for k, v in limits.items()}}
    spec: dict[str, Any] = {
        "restartPolicy": "Never" if restart_never else "Always",
        "dnsPolicy": "Default",  # no cluster DNS here
        "terminationGracePeriodSeconds": 0,
        "containers": [container],
    }
    if claims:
        spec["resourceClaims"] = [{"name": n, "resourceClaimTemplateName": t} for n, t in claims.items()]
        container.setdefault("resources", {})["claims"] = [{"name": n} for n in claims]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": namespace}, "spec": spec}


def run_to_end(cluster: RealCluster, pod: dict[str, Any], timeout_s: float = 90) -> tuple[dict[str, Any], str]:
    """Create the pod, wait until it finished, return (the pod, its log)."""
    kubectl = cluster.kubectl
    kubectl.create(json.dumps(pod))
    meta = pod["metadata"]
    done = kubectl.wait_pod_done(meta["namespace"], meta["name"], timeout_s)
    try:
        log = kubectl.logs(meta["namespace"], meta["name"])
    except Exception as error:  # a pod refused at admission has no log
        log = f"(no log: {error})"
    return done, log


def start_running(cluster: RealCluster, pod: dict[str, Any], timeout_s: float = 90) -> dict[str, Any]:
    """Create the pod and wait until its container runs."""
    kubectl = cluster.kubectl
    kubectl.create(json.dumps(pod))
    meta = pod["metadata"]

    def running() -> dict[str, Any] | None:
        got: dict[str, Any] = kubectl.get("pod", "-n", meta["namespace"], meta["name"])
        phase = got.get("status", {}).get("phase")
        if phase in ("Failed", "Succeeded"):
            raise AssertionError(f"pod {meta['name']} ended ({phase}) before it ran: {got.get('status')}")
        return got if phase == "Running" else None

    found: dict[str, Any] = kubectl.wait_for(f"pod {meta['name']} running", running, timeout_s)
    return found


def delete_and_wait(cluster: RealCluster, namespace: str, name: str, timeout_s: float = 60) -> None:
    kubectl = cluster.kubectl
    kubectl.delete("pod", "-n", namespace, name)
    kubectl.wait_for(
        f"pod {namespace}/{name} gone",
        lambda: not kubectl.items("pods", "-n", namespace, f"--field-selector=metadata.name={name}"),
        timeout_s,
    )


def resource_health(pod: dict[str, Any]) -> dict[str, str]:
    """What the kubelet reports in the pod's status of each device it allocated (KEP-4680): resourceID ->
    health. Device plugin: the device ID; DRA: the CDI device ID Prepare answered."""
    found: dict[str, str] = {}
    for status in pod.get("status", {}).get("containerStatuses", []) or []:
        for resource in status.get("allocatedResourcesStatus", []) or []:
            for entry in resource.get("resources", []) or []:
                found[entry["resourceID"]] = entry.get("health", "")
    return found
