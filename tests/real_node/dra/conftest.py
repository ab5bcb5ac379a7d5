"""DRA mode on the real kubelet and scheduler: deploy/dra applied as shipped, and our driver run under a token
bound to a pod of its service account (RBAC and the admission policy see what the DaemonSet's pod gives them).

The DaemonSet itself gets no pod here: its affinity asks for nvidia.com/gpu.present, which this node lacks,
so our driver runs as a process of the host (testbed/realnode/our_daemon.py says why).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from testbed.realnode.cluster import RealCluster
from testbed.realnode.kubectl import KubectlError
from testbed.realnode.manifests import EXAMPLES_NAMESPACE, apply_dra
from testbed.realnode.our_daemon import NAMESPACE as DRIVER_NAMESPACE
from testbed.realnode.our_daemon import OurDaemon, dra_args, dra_env

DRIVER = "gpu.gpu-device-plugin.io"
EXAMPLES = EXAMPLES_NAMESPACE
_serial = itertools.count()


@pytest.fixture(scope="session")
def deployed(cluster: RealCluster) -> RealCluster:
    """deploy/dra as shipped (server-side apply: the real API server validates every object)."""
    apply_dra(cluster)
    return cluster


def kubelet_dir(cluster: RealCluster) -> Path:
    assert cluster.kubelet is not None
    return cluster.kubelet.root_dir


@pytest.fixture
def dra_driver(deployed: RealCluster) -> Iterator[Callable[..., OurDaemon]]:
    """Start our DRA driver: dra_driver("--machine", "dgx1-v100", per_instance=False, holder=None, env=None)."""
    started: list[OurDaemon] = []

    def start(
        *args: str,
        per_instance: bool = False,
        holder: str | None = None,
        wait: bool = True,
        env: dict[str, str] | None = None,
    ) -> OurDaemon:
        name = holder or f"driver-{next(_serial)}"
        env = {**dra_env(deployed, name, per_instance=per_instance), **(env or {})}
        daemon = OurDaemon(deployed, name, dra_args(deployed, *args), env)
        started.append(daemon)
        return daemon.start(wait_ready=wait)

    yield start
    for daemon in started:
        daemon.stop()
    _clean(deployed)


def _clean(cluster: RealCluster) -> None:
    """Pods and claims of the examples gone, the holders gone, no slice of ours left."""
    kubectl = cluster.kubectl
    kubectl.run("delete", "pods", "--all", "-n", EXAMPLES, "--grace-period=0", "--force", "--wait=true")
    kubectl.run("delete", "resourceclaims", "--all", "-n", EXAMPLES, "--wait=true")
    kubectl.run("delete", "pods", "-l", "real-node/holder=true", "-n", DRIVER_NAMESPACE, "--grace-period=0",
                "--force", "--wait=true")  # fmt: skip
    kubectl.run("delete", "resourceslices", f"--field-selector=spec.driver={DRIVER}", "--wait=true")


def slices(cluster: RealCluster) -> list[dict[str, Any]]:
    return cluster.kubectl.items("resourceslices", f"--field-selector=spec.driver={DRIVER}")


def devices(cluster: RealCluster) -> dict[str, dict[str, Any]]:
    """Our published devices by name, from the slices of the newest pool generation."""
    found = slices(cluster)
    if not found:
        return {}
    newest = max(s["spec"]["pool"]["generation"] for s in found)
    return {d["name"]: d for s in found if s["spec"]["pool"]["generation"] == newest for d in s["spec"]["devices"]}


def claim_of(cluster: RealCluster, pod_name: str, namespace: str = EXAMPLES) -> dict[str, Any]:
    """The ResourceClaim the resource-claim controller made for the pod's one claim."""
    pod = cluster.kubectl.get("pod", "-n", namespace, pod_name)
    statuses = pod.get("status", {}).get("resourceClaimStatuses", [])
    assert statuses, f"pod {pod_name} has no claim yet: {pod.get('status')}"
    claim: dict[str, Any] = cluster.kubectl.get("resourceclaim", "-n", namespace, statuses[0]["resourceClaimName"])
    return claim


def allocated(claim: dict[str, Any]) -> list[str]:
    results = claim.get("status", {}).get("allocation", {}).get("devices", {}).get("results", [])
    return sorted(r["device"] for r in results if r["driver"] == DRIVER)


def refused(error: KubectlError) -> str:
    return error.stderr
