"""The Helm chart on the real API server: every object of each mode accepted by server-side validation and
admission (a server-side dry run, so nothing of the chart stays but its Namespace and ServiceAccount, applied
as deploy/ applies them), and the DaemonSet's pod, as its template makes it, admitted in that namespace."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from testbed.realnode.cluster import RealCluster

CHART = Path(__file__).resolve().parents[2] / "deploy" / "helm" / "gpu-device-plugin"
HELM = os.environ.get("GPU_DEVICE_PLUGIN_HELM") or shutil.which("helm")
pytestmark = pytest.mark.skipif(
    HELM is None, reason="no helm: GPU_DEVICE_PLUGIN_HELM is not set and helm is not on PATH (.ci/run builds it)"
)


def rendered(*sets: str) -> list[dict[str, Any]]:
    assert HELM is not None
    args = [HELM, "template", "gdp", str(CHART), *(a for s in sets for a in ("--set", s))]
    done = subprocess.run(args, capture_output=True, text=True, timeout=60, check=True)
    return [o for o in yaml.safe_load_all(done.stdout) if o]


@pytest.mark.parametrize("mode", ["device-plugin", "dra"])
def test_every_object_of_the_chart_is_accepted_and_its_daemonsets_pod_admitted(cluster: RealCluster, mode: str) -> None:
    objects = rendered(f"mode={mode}")
    applied = {"Namespace", "ServiceAccount"}  # what the pod's admission looks up
    kubectl = cluster.kubectl
    first = {"apiVersion": "v1", "kind": "List", "items": [o for o in objects if o["kind"] in applied]}
    kubectl.run("apply", "--server-side", "--force-conflicts", "-f", "-", stdin=json.dumps(first))
    others = {"apiVersion": "v1", "kind": "List", "items": [o for o in objects if o["kind"] not in applied]}
    out = kubectl.run("apply", "--server-side", "--force-conflicts", "--dry-run=server", "-f", "-",
                      stdin=json.dumps(others))  # fmt: skip
    assert out.count("(server dry run)") == len(others["items"]), out
    (daemonset,) = [o for o in objects if o["kind"] == "DaemonSet"]
    template = daemonset["spec"]["template"]
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {**template["metadata"], "name": f"gdp-{mode}",
           "namespace": daemonset["metadata"]["namespace"]}, "spec": template["spec"]}  # fmt: skip
    assert "(server dry run)" in kubectl.run("create", "--dry-run=server", "-f", "-", stdin=json.dumps(pod))
