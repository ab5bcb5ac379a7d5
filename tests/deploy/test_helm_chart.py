"""The Helm chart (deploy/helm/gpu-device-plugin) is the kustomize manifests: generated from them (the committed
chart equals a fresh generation), and `helm template` renders exactly what kustomize renders for each mode and
rolling-update choice; its values (image, config, admission policy) change only what they name, and a wrong
value is refused naming it. Needs helm (GPU_DEVICE_PLUGIN_HELM, or helm on PATH) for all but the first."""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from device_plugin.config.model import parse_config

REPO = Path(__file__).resolve().parents[2]
CHART = REPO / "deploy" / "helm" / "gpu-device-plugin"


def _generator() -> Any:
    spec = importlib.util.spec_from_file_location("gen_helm_chart", REPO / "tools" / "gen_helm_chart.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["gen_helm_chart"] = module
    spec.loader.exec_module(module)
    return module


GEN = _generator()
HELM = os.environ.get("GPU_DEVICE_PLUGIN_HELM") or shutil.which("helm")
needs_helm = pytest.mark.skipif(
    HELM is None, reason="no helm: GPU_DEVICE_PLUGIN_HELM is not set and helm is not on PATH (.ci/run builds it)"
)


def files(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): p.read_text() for p in sorted(root.rglob("*")) if p.is_file()}


def test_the_committed_chart_is_what_the_generator_makes_of_the_manifests(tmp_path: Path) -> None:
    GEN.generate(tmp_path)
    assert files(tmp_path / GEN.CHART) == files(CHART), "deploy/helm is stale: run `make helm-chart`"


def helm(*args: str) -> subprocess.CompletedProcess[str]:
    assert HELM is not None
    return subprocess.run([HELM, *args], capture_output=True, text=True, timeout=60)


def template(*sets: str) -> list[dict[str, Any]]:
    done = helm("template", "gdp", str(CHART), *(a for s in sets for a in ("--set", s)))
    assert done.returncode == 0, done.stderr
    return [o for o in yaml.safe_load_all(done.stdout) if o]


def canonical(objects: list[dict[str, Any]]) -> list[str]:
    return sorted(json.dumps(o, sort_keys=True) for o in objects)


@needs_helm
def test_helm_lint_passes() -> None:
    done = helm("lint", "--strict", str(CHART))
    assert done.returncode == 0, done.stdout + done.stderr


@needs_helm
@pytest.mark.parametrize("variant", list(GEN.VARIANTS))
def test_each_mode_renders_what_kustomize_renders(variant: str) -> None:
    mode, rolling = variant.removesuffix("-rolling"), variant.endswith("-rolling")
    got = template(f"mode={mode}", f"rollingUpdate={str(rolling).lower()}")
    assert canonical(got) == canonical(GEN.render(GEN.VARIANTS[variant]))


def of_kind(objects: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [o for o in objects if o["kind"] == kind]


@needs_helm
def test_the_image_config_and_admission_policy_are_values() -> None:
    config = "version: v1\nflags:\n  migStrategy: single\n"
    got = template("mode=dra", "image=registry.local/gdp:9.9", "admissionPolicy=false", f"config={config}")
    (daemonset,) = of_kind(got, "DaemonSet")
    assert daemonset["spec"]["template"]["spec"]["containers"][0]["image"] == "registry.local/gdp:9.9"
    (configmap,) = of_kind(got, "ConfigMap")
    assert configmap["data"]["config.yaml"] == config
    assert not of_kind(got, "ValidatingAdmissionPolicy") and not of_kind(got, "ValidatingAdmissionPolicyBinding")
    assert len(got) == len(template("mode=dra")) - 2  # nothing else left out


@needs_helm
@pytest.mark.parametrize(
    ("value", "named"),
    [("mode=cuda", "mode"), ("rollingUpdate=maybe", "rollingUpdate"), ("replicas=3", "replicas")],
    ids=["an-unknown-mode", "a-non-boolean", "a-value-the-chart-does-not-have"],
)
def test_a_wrong_value_is_refused_naming_it(value: str, named: str) -> None:
    done = helm("template", "gdp", str(CHART), "--set", value)
    assert done.returncode != 0 and named in done.stderr, done.stderr


def test_the_default_config_value_is_a_config_the_daemon_loads() -> None:
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    parse_config(yaml.safe_load(values["config"]))
