"""kubectl with no cluster: a kubeconfig whose server is a loopback port that refuses every connection, and a
discovery cache that answers kubectl's mapping of each kind to its resource, so that `kubectl create -k DIR
--dry-run=client` runs offline, and `kubectl apply -k DIR --dry-run=client` runs up to the first request that
only an API server can answer.

What a client dry-run needs from kubectl's surroundings (found with kubectl 1.32, kustomize v5.5):
- a user in the kubeconfig, or kubectl asks for a user name on the terminal (a token no one checks will do);
- discovery, to map each kind to its resource and to know whether it is namespaced: the API server's, or a
  cache under --cache-dir (servergroups.json and <group>/<version>/serverresources.json) younger than its
  time to live. DISCOVERY is the part of a cluster's discovery that covers the kinds deploy/ uses;
- --validate=false, because validation downloads the server's OpenAPI document (tests/deploy validates the
  objects against the published schemas with kubernetes-validate instead);
- and for `apply` an API server, client dry-run or not: apply GETs each object's live state to compute its
  patch, and only "not found" lets it go on; a refused connection is an error. `create --dry-run=client`
  sends nothing.

Boundary: this module writes those files and runs kubectl; what the output must be is the tests' business.
"""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import yaml

KUBECTL_TIMEOUT_S = 60
# The kubeconfig's namespace: kubectl gives it to every namespaced object that names none of its own.
KUBECONFIG_NAMESPACE = "namespace-from-the-kubeconfig"

# (group/version, kind, resource, namespaced), as the Kubernetes API and the Prometheus Operator's CRDs serve
# them (the scopes of the Kubernetes kinds are checked against the official client in test_kubectl_apply.py)
DISCOVERY = (
    ("v1", "Namespace", "namespaces", False),
    ("v1", "ServiceAccount", "serviceaccounts", True),
    ("v1", "ConfigMap", "configmaps", True),
    ("v1", "Service", "services", True),
    ("v1", "Pod", "pods", True),
    ("apps/v1", "DaemonSet", "daemonsets", True),
    ("rbac.authorization.k8s.io/v1", "ClusterRole", "clusterroles", False),
    ("rbac.authorization.k8s.io/v1", "ClusterRoleBinding", "clusterrolebindings", False),
    ("networking.k8s.io/v1", "NetworkPolicy", "networkpolicies", True),
    ("admissionregistration.k8s.io/v1", "ValidatingAdmissionPolicy", "validatingadmissionpolicies", False),
    ("admissionregistration.k8s.io/v1", "ValidatingAdmissionPolicyBinding", "validatingadmissionpolicybindings", False),
    ("resource.k8s.io/v1", "DeviceClass", "deviceclasses", False),
    ("resource.k8s.io/v1", "ResourceClaimTemplate", "resourceclaimtemplates", True),
    ("monitoring.coreos.com/v1", "ServiceMonitor", "servicemonitors", True),
    ("monitoring.coreos.com/v1", "PrometheusRule", "prometheusrules", True),
)
VERBS = ["create", "delete", "get", "list", "patch", "update", "watch"]


@dataclass(frozen=True)
class OfflineKubectl:
    kubeconfig: Path
    cache_dir: Path
    server: str

    def run(self, *args: str) -> subprocess.CompletedProcess[str]:
        if shutil.which("kubectl") is None:
            raise FileNotFoundError(
                "`kubectl` is not on PATH: these tests run `kubectl apply -k` and `kubectl create -k`"
            )
        command = ["kubectl", f"--kubeconfig={self.kubeconfig}", f"--cache-dir={self.cache_dir}", *args]
        return subprocess.run(command, capture_output=True, text=True, timeout=KUBECTL_TIMEOUT_S, check=False)


@contextmanager
def offline_kubectl(root: Path) -> Iterator[OfflineKubectl]:
    """kubectl set up under `root`, its server a port this process holds bound and never listens on."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as refusing:
        refusing.bind(("127.0.0.1", 0))  # bound, not listening: connections are refused, and no one else binds it
        port = refusing.getsockname()[1]
        server = f"https://127.0.0.1:{port}"
        kubeconfig = root / "kubeconfig"
        kubeconfig.write_text(yaml.safe_dump(_kubeconfig(server)))
        write_discovery(root / "cache" / "discovery" / f"127.0.0.1_{port}")
        yield OfflineKubectl(kubeconfig, root / "cache", server)


def _kubeconfig(server: str) -> dict[str, object]:
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "offline", "cluster": {"server": server}}],
        "users": [{"name": "offline", "user": {"token": "checked-by-no-one"}}],
        "contexts": [
            {"name": "offline", "context": {"cluster": "offline", "user": "offline", "namespace": KUBECONFIG_NAMESPACE}}
        ],
        "current-context": "offline",
    }


def write_discovery(folder: Path) -> None:
    """The files of kubectl's discovery cache for one server (`folder` is <cache-dir>/discovery/<host>_<port>)."""
    versions = sorted({group_version for group_version, *_ in DISCOVERY})
    groups = {}
    for group_version in versions:
        group = group_version.rpartition("/")[0]
        entry = {"groupVersion": group_version, "version": group_version.rpartition("/")[2]}
        groups[group] = {"name": group, "versions": [entry], "preferredVersion": entry}
        resources = [
            {"name": resource, "singularName": kind.lower(), "namespaced": namespaced, "kind": kind, "verbs": VERBS}
            for version, kind, resource, namespaced in DISCOVERY
            if version == group_version
        ]
        listing = {"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": group_version, "resources": resources}
        (folder / group_version).mkdir(parents=True, exist_ok=True)
        (folder / group_version / "serverresources.json").write_text(json.dumps(listing))
    group_list = {"kind": "APIGroupList", "apiVersion": "v1", "groups": list(groups.values())}
    (folder / "servergroups.json").write_text(json.dumps(group_list))
