"""Every kustomization renders, agrees with real kustomize where it is installed, and passes the
Kubernetes OpenAPI schemas offline (kubernetes-validate, strict: unknown fields are errors)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml

from tests.deploy.conftest import DEPLOY_DIR, KUSTOMIZATIONS
from tests.deploy.render import by_identity, kustomize_command, merge, render, render_with_kustomize

# The oldest kubelet with the CDI field in Allocate by default (1.29, beta) and a current one.
KUBERNETES_VERSIONS = ("1.29", "1.33")


def test_every_overlay_is_covered() -> None:
    assert set(KUSTOMIZATIONS) == {
        "base",
        "overlays/cdi",
        "overlays/device-plugin-pool",
        "overlays/fake-gpu",
        "overlays/image",
        "overlays/mig-mixed",
        "overlays/network-policy",
        "overlays/time-slicing",
    }


@pytest.mark.parametrize("name", KUSTOMIZATIONS)
@pytest.mark.parametrize("version", KUBERNETES_VERSIONS)
def test_every_object_is_valid_kubernetes(rendered: dict[str, list[dict[str, Any]]], name: str, version: str) -> None:
    kinds = sorted(o["kind"] for o in rendered[name])
    extra = {"overlays/fake-gpu": ["ConfigMap"], "overlays/network-policy": ["NetworkPolicy"]}.get(name, [])
    assert kinds == sorted(["Namespace", "ServiceAccount", "ConfigMap", "DaemonSet", "Service", *extra])
    for obj in rendered[name]:
        kubernetes_validate.validate(obj, version, strict=True)


def test_validation_would_catch_a_misspelt_field(rendered: dict[str, list[dict[str, Any]]]) -> None:
    daemonset = next(o for o in rendered["base"] if o["kind"] == "DaemonSet")
    broken = merge(daemonset, {"spec": {"template": {"spec": {"tolerations": [{"key": "x", "efect": "NoSchedule"}]}}}})
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(broken, KUBERNETES_VERSIONS[-1], strict=True)


@pytest.mark.skipif(kustomize_command() is None, reason="neither kustomize nor kubectl on PATH")
@pytest.mark.parametrize("name", KUSTOMIZATIONS)
def test_python_rendering_equals_kustomize(rendered: dict[str, list[dict[str, Any]]], name: str) -> None:
    command = kustomize_command()
    assert command is not None
    assert by_identity(rendered[name]) == by_identity(render_with_kustomize(DEPLOY_DIR / name, command))


MERGE_CASES = [
    ({"a": {"b": 1, "c": 2}}, {"a": {"c": 3}}, {"a": {"b": 1, "c": 3}}),
    ({"a": 1, "b": 2}, {"b": None}, {"a": 1}),
    ({"args": ["x", "y"]}, {"args": ["z"]}, {"args": ["z"]}),
    (
        {"env": [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}]},
        {"env": [{"name": "C", "value": "3"}, {"name": "B", "value": "9"}]},
        {"env": [{"name": "C", "value": "3"}, {"name": "B", "value": "9"}, {"name": "A", "value": "1"}]},
    ),
    ({"tolerations": [{"key": "a"}]}, {"tolerations": [{"key": "b"}]}, {"tolerations": [{"key": "b"}]}),
]


@pytest.mark.parametrize(
    ("base", "patch", "expected"),
    MERGE_CASES,
    ids=["maps-merge", "null-deletes", "plain-list-replaced", "keyed-list-merged-patch-first", "unkeyed-replaced"],
)
def test_strategic_merge_subset(base: dict[str, Any], patch: dict[str, Any], expected: dict[str, Any]) -> None:
    assert merge(base, patch) == expected


@pytest.mark.parametrize(
    ("kustomization", "message"),
    [
        ({"resources": [], "namespace": "x"}, "need real kustomize"),
        ({"resources": [], "patches": [{"path": "p.yaml", "target": {"kind": "X"}}]}, "only `patches: - path"),
    ],
    ids=["unsupported-key", "patch-with-target"],
)
def test_renderer_refuses_what_it_does_not_implement(
    tmp_path: Path, kustomization: dict[str, Any], message: str
) -> None:
    (tmp_path / "kustomization.yaml").write_text(yaml.safe_dump(kustomization))
    with pytest.raises(ValueError, match=message):
        render(tmp_path)
