"""`kubectl apply -k` on every kustomization under deploy/, as far as it can go without a cluster
(tests/deploy/offline_kubectl.py says what kubectl needs, and why apply cannot finish without an API server):
`kubectl create -k DIR --dry-run=client` maps every object and sends exactly what kustomize renders, and
`kubectl apply -k DIR --dry-run=client` fails only where it asks the API server for each object's live state."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import kubernetes.client
import pytest
import yaml

from tests.deploy.conftest import ALL, DEPLOY_DIR, Rendered
from tests.deploy.offline_kubectl import DISCOVERY, KUBECONFIG_NAMESPACE, OfflineKubectl, offline_kubectl

DRY_RUN = ("--dry-run=client", "--validate=false")
CLIENT_APIS = {
    "v1": "CoreV1Api",
    "apps/v1": "AppsV1Api",
    "rbac.authorization.k8s.io/v1": "RbacAuthorizationV1Api",
    "networking.k8s.io/v1": "NetworkingV1Api",
    "admissionregistration.k8s.io/v1": "AdmissionregistrationV1Api",
    "resource.k8s.io/v1": "ResourceV1Api",
}
KUSTOMIZATION = {"apiVersion": "kustomize.config.k8s.io/v1beta1", "kind": "Kustomization", "resources": ["o.yaml"]}


@pytest.fixture(scope="module")
def kubectl(tmp_path_factory: pytest.TempPathFactory) -> Iterator[OfflineKubectl]:
    with offline_kubectl(tmp_path_factory.mktemp("kubectl")) as offline:
        yield offline


def created(kubectl: OfflineKubectl, folder: Path) -> list[dict[str, Any]]:
    done = kubectl.run("create", "-k", str(folder), *DRY_RUN, "-o", "yaml")
    assert done.returncode == 0, f"kubectl create -k {folder}: {done.stderr}"
    return [doc for doc in yaml.safe_load_all(done.stdout) if doc is not None]


@pytest.mark.parametrize("name", ALL)
def test_client_dry_run_create_sends_what_kustomize_renders(
    kubectl: OfflineKubectl, rendered: Rendered, name: str
) -> None:
    # Equal objects also mean kubectl gave none the kubeconfig's namespace: each names its own.
    assert created(kubectl, DEPLOY_DIR / name) == rendered[name]


@pytest.mark.parametrize("name", ALL)
def test_client_dry_run_apply_stops_only_at_the_api_server(
    kubectl: OfflineKubectl, rendered: Rendered, name: str
) -> None:
    done = kubectl.run("apply", "-k", str(DEPLOY_DIR / name), *DRY_RUN)
    assert done.returncode != 0 and done.stdout == ""
    before, *requests = done.stderr.split("error when retrieving current configuration of:\n")
    assert before == "", "kubectl stopped before asking the API server"
    asked = [re.search(r'Name: "([^"]*)", Namespace: "([^"]*)"', request) for request in requests]
    assert all(asked), done.stderr
    assert sorted(m.groups() for m in asked if m) == sorted(
        (o["metadata"]["name"], o["metadata"].get("namespace", "")) for o in rendered[name]
    )
    assert all(f"{kubectl.server}/" in r and "connection refused" in r for r in requests)


def write(folder: Path, obj: dict[str, Any]) -> Path:
    (folder / "kustomization.yaml").write_text(yaml.safe_dump(KUSTOMIZATION))
    (folder / "o.yaml").write_text(yaml.safe_dump(obj))
    return folder


def test_an_object_without_a_namespace_would_land_in_the_kubeconfigs(kubectl: OfflineKubectl, tmp_path: Path) -> None:
    (obj,) = created(kubectl, write(tmp_path, {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}}))
    assert obj["metadata"]["namespace"] == KUBECONFIG_NAMESPACE


def test_a_kind_the_discovery_lacks_sends_kubectl_to_the_api_server(kubectl: OfflineKubectl, tmp_path: Path) -> None:
    """A kind missing from DISCOVERY is not passed over: kubectl asks the API server, so a create that succeeds
    found each kind in DISCOVERY, whose scopes the test below checks."""
    write(tmp_path, {"apiVersion": "resource.k8s.io/v1beta9", "kind": "DeviceClass", "metadata": {"name": "d"}})
    done = kubectl.run("create", "-k", str(tmp_path), *DRY_RUN)
    assert done.returncode != 0
    assert f'unable to recognize "{tmp_path}"' in done.stderr and "connection refused" in done.stderr


@pytest.mark.parametrize(
    ("group_version", "kind", "namespaced"),
    [(gv, kind, namespaced) for gv, kind, _, namespaced in DISCOVERY if gv in CLIENT_APIS],
    ids=[kind for gv, kind, _, _ in DISCOVERY if gv in CLIENT_APIS],
)
def test_the_discovery_scopes_are_the_official_clients(group_version: str, kind: str, namespaced: bool) -> None:
    """The client is generated from the Kubernetes OpenAPI: a namespaced kind has create_namespaced_<kind>."""
    api = getattr(kubernetes.client, CLIENT_APIS[group_version])
    snake = re.sub(r"(?<!^)(?=[A-Z])", "_", kind).lower()
    assert hasattr(api, f"create_namespaced_{snake}") is namespaced
    assert hasattr(api, f"create_{snake}") is not namespaced
