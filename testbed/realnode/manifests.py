"""Our own manifests applied to the real control plane as shipped (server-side apply: the API server checks
every object), and where they live in the checkout."""

from __future__ import annotations

from pathlib import Path

from testbed.realnode.cluster import RealCluster

ROOT = Path(__file__).resolve().parents[2]  # the checkout
DEPLOY = ROOT / "deploy"
EXAMPLES = DEPLOY / "dra" / "examples"
EXAMPLES_NAMESPACE = "gpu-dra-examples"


def apply_dra(cluster: RealCluster) -> None:
    """deploy/dra (RBAC, DeviceClasses, the admission policy, the DaemonSet) and the example claim templates."""
    cluster.kubectl.run("apply", "--server-side", "-k", str(DEPLOY / "dra"))
    cluster.kubectl.run(
        "apply", "--server-side", "-f", str(EXAMPLES / "namespace.yaml"), "-f", str(EXAMPLES / "claim-templates.yaml")
    )
