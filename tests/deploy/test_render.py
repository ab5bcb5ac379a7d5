"""Every kustomization under deploy/ renders with real kustomize, and the device-plugin ones pass the
Kubernetes OpenAPI schemas offline (kubernetes-validate, strict: unknown fields are errors). The tool is
found on PATH or the tests fail naming it, and it refuses what kustomize refuses (a stand-in did not)."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml

from tests.deploy.conftest import ALL, KUSTOMIZATIONS, Rendered
from tests.deploy.kustomize import DEPLOY_DIR, KustomizeError, build, components, identity, kustomize_command

# The oldest kubelet with the CDI field in Allocate by default (1.29, beta) and a current one.
KUBERNETES_VERSIONS = ("1.29", "1.33")


def test_every_kustomization_is_found() -> None:
    assert set(KUSTOMIZATIONS) == {
        "base",
        "overlays/cdi",
        "overlays/device-plugin-pool",
        "overlays/fake-gpu",
        "overlays/image",
        "overlays/mig-mixed",
        "overlays/network-policy",
        "overlays/rolling-update",
        "overlays/time-slicing",
    }
    others = {"dra", "dra/driver", "dra/extended-resource", "dra/examples", "dra/examples/mig", "monitoring"}
    assert others | {"dra/rolling-update", "dra/mps-shares"} <= set(ALL) - set(KUSTOMIZATIONS)
    assert components() == ["components/mps-shares", "components/rolling-update"]


@pytest.mark.parametrize("component", components())
def test_every_component_is_used_by_a_kustomization(component: str) -> None:
    """A component renders only inside a kustomization: one that none lists is dead weight no test renders."""
    users = [name for name in ALL if (DEPLOY_DIR / component).resolve() in _components_of(name)]
    assert users, f"deploy/{component} is listed by no kustomization"


def _components_of(name: str) -> list[Path]:
    folder = DEPLOY_DIR / name
    listed = yaml.safe_load((folder / "kustomization.yaml").read_text()).get("components", [])
    return [(folder / c).resolve() for c in listed]


@pytest.mark.parametrize("name", ALL)
def test_every_kustomization_renders_distinct_named_objects(rendered: Rendered, name: str) -> None:
    objects = rendered[name]
    assert objects, f"deploy/{name} renders nothing"
    ids = [identity(o) for o in objects]
    assert len(ids) == len(set(ids)), f"deploy/{name} renders an object twice"


@pytest.mark.parametrize("name", KUSTOMIZATIONS)
@pytest.mark.parametrize("version", KUBERNETES_VERSIONS)
def test_every_object_is_valid_kubernetes(rendered: Rendered, name: str, version: str) -> None:
    kinds = sorted(o["kind"] for o in rendered[name])
    extra = {"overlays/fake-gpu": ["ConfigMap"], "overlays/network-policy": ["NetworkPolicy"]}.get(name, [])
    assert kinds == sorted(["Namespace", "ServiceAccount", "ConfigMap", "DaemonSet", "Service", *extra])
    for obj in rendered[name]:
        kubernetes_validate.validate(obj, version, strict=True)


def test_validation_would_catch_a_misspelt_field(rendered: Rendered) -> None:
    daemonset = copy.deepcopy(next(o for o in rendered["base"] if o["kind"] == "DaemonSet"))
    daemonset["spec"]["template"]["spec"]["tolerations"] = [{"key": "x", "efect": "NoSchedule"}]
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(daemonset, KUBERNETES_VERSIONS[-1], strict=True)


@pytest.mark.parametrize(
    ("on_path", "expected"),
    [
        (("kustomize", "kubectl"), ["kustomize", "build"]),
        (("kubectl",), ["kubectl", "kustomize"]),
        (("kustomize",), ["kustomize", "build"]),
    ],
    ids=["kustomize-preferred", "kubectl-alone", "kustomize-alone"],
)
def test_the_tool_is_found_on_path(tmp_path: Path, on_path: tuple[str, ...], expected: list[str]) -> None:
    for tool in on_path:  # which() needs only an executable file of that name; nothing runs it
        (tmp_path / tool).write_text("#!/bin/sh\nexit 1\n")
        (tmp_path / tool).chmod(0o755)
    assert kustomize_command(str(tmp_path)) == expected


def test_without_either_tool_the_tests_fail_naming_both(tmp_path: Path) -> None:
    with pytest.raises(KustomizeError, match=r"neither `kustomize` nor `kubectl` is on PATH"):
        kustomize_command(str(tmp_path))


def write_tree(root: Path, files: dict[str, Any]) -> None:
    for name, content in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(yaml.safe_dump(content))


CONFIGMAP = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}}
KUSTOMIZATION = {"apiVersion": "kustomize.config.k8s.io/v1beta1", "kind": "Kustomization"}


@pytest.mark.parametrize(
    ("files", "folder", "message"),
    [
        (
            {
                "kustomization.yaml": {**KUSTOMIZATION, "resources": ["cm.yaml"]},
                "cm.yaml": CONFIGMAP,
                "variant/kustomization.yaml": {**KUSTOMIZATION, "resources": [".."]},
            },
            "variant",
            "cycle detected",
        ),
        ({"kustomization.yaml": {**KUSTOMIZATION, "resources": ["missing.yaml"]}}, ".", "missing.yaml"),
        ({"kustomization.yaml": {**KUSTOMIZATION, "resourcez": ["cm.yaml"]}, "cm.yaml": CONFIGMAP}, ".", "resourcez"),
    ],
    ids=["a-variant-listing-its-parent-folder", "a-missing-resource", "a-misspelt-key"],
)
def test_what_kustomize_refuses_fails_with_its_words(
    tmp_path: Path, files: dict[str, Any], folder: str, message: str
) -> None:
    """The first case is the layout deploy/dra/extended-resource had: our old renderer built it, kustomize never."""
    write_tree(tmp_path, files)
    with pytest.raises(KustomizeError, match=message):
        build(tmp_path / folder)
