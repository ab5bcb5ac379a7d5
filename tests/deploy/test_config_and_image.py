"""The ConfigMaps carry valid NVIDIA v1 configs, the fake machine exists, and the Dockerfile keeps its promises."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from device_plugin.allocation.response_builders import parse_device_id_strategy, parse_device_list_strategies
from device_plugin.config.model import parse_config
from tests.deploy.conftest import DEPLOY_DIR, KUSTOMIZATIONS, Rendered, only

REPO = DEPLOY_DIR.parent
MACHINES_DIR = REPO / "device_plugin" / "machines"
NVIDIA_TOP_LEVEL = {"version", "flags", "resources", "sharing", "imex"}

EXPECTED = {
    # kustomization: (migStrategy, deviceListStrategy, time-slicing replicas or None)
    "base": ("none", ("envvar",), None),
    "overlays/cdi": ("none", ("cdi-cri",), None),
    "overlays/device-plugin-pool": ("none", ("envvar",), None),
    "overlays/fake-gpu": ("none", ("envvar",), None),
    "overlays/image": ("none", ("envvar",), None),
    "overlays/mig-mixed": ("mixed", ("envvar",), None),
    "overlays/network-policy": ("none", ("envvar",), None),
    "overlays/rolling-update": ("none", ("envvar",), None),
    "overlays/time-slicing": ("none", ("envvar",), 4),
}


def plugin_config(objects: list[dict[str, Any]]) -> dict[str, Any]:
    configmap = next(o for o in objects if o["kind"] == "ConfigMap" and o["metadata"]["name"].endswith("-config"))
    return yaml.safe_load(configmap["data"]["config.yaml"])


def test_expectations_cover_every_kustomization() -> None:
    assert set(EXPECTED) == set(KUSTOMIZATIONS)


@pytest.mark.parametrize("name", KUSTOMIZATIONS)
def test_configmap_holds_a_valid_nvidia_v1_config(rendered: Rendered, name: str) -> None:
    raw = plugin_config(rendered[name])
    assert raw["version"] == "v1"
    assert set(raw) <= NVIDIA_TOP_LEVEL, "only NVIDIA's keys, so the file also works with NVIDIA's plugin"
    config = parse_config(raw)  # the daemon's own parser: raises ConfigError naming a bad field
    mig, strategies, replicas = EXPECTED[name]
    assert config.flags.mig_strategy == mig
    assert config.flags.plugin.device_list_strategy == strategies
    assert parse_device_list_strategies(config.flags.plugin.device_list_strategy)
    parse_device_id_strategy(config.flags.plugin.device_id_strategy)
    time_slicing = config.sharing.time_slicing
    resources = time_slicing.resources if time_slicing is not None else ()
    assert [r.replicas for r in resources] == ([replicas] if replicas else [])


def test_fake_machine_is_a_shipped_machine(rendered: Rendered) -> None:
    objects = rendered["overlays/fake-gpu"]
    machine_map = next(o for o in objects if o["metadata"]["name"] == "gpu-device-plugin-fake-machine")
    assert (MACHINES_DIR / f"{machine_map['data']['machine']}.yaml").is_file()


def test_base_configmap_is_mounted_so_edits_reach_the_pod(rendered: Rendered) -> None:
    # A subPath mount would freeze the file at pod start; a directory mount follows ConfigMap edits.
    daemonset = only(rendered["base"], "DaemonSet")
    (c,) = daemonset["spec"]["template"]["spec"]["containers"]
    assert all("subPath" not in m for m in c["volumeMounts"])


def dockerfile_instructions() -> list[tuple[str, str]]:
    text = (REPO / "Dockerfile").read_text().replace("\\\n", " ")
    lines = [line.strip() for line in text.splitlines() if line.strip() and not line.strip().startswith("#")]
    return [(line.split(None, 1)[0].upper(), line.split(None, 1)[1]) for line in lines]


def test_dockerfile_base_is_slim_python_311_pinned_to_a_release() -> None:
    instructions = dockerfile_instructions()
    (arg,) = [value for op, value in instructions if op == "ARG" and value.startswith("PYTHON_IMAGE=")]
    assert re.fullmatch(r"PYTHON_IMAGE=python:3\.11\.\d+-slim-\w+(@sha256:[0-9a-f]{64})?", arg), arg
    assert all(value.split()[0] == "${PYTHON_IMAGE}" for op, value in instructions if op == "FROM")


def test_dockerfile_installs_exactly_pinned_dependencies() -> None:
    for name in ("requirements.txt", "build-requirements.txt"):
        text = (DEPLOY_DIR / "image" / name).read_text()
        lines = [line for line in text.splitlines() if line and not line.startswith("#")]
        assert lines
        assert all(re.fullmatch(r"[A-Za-z0-9_.-]+==[0-9][0-9A-Za-z.]*", line) for line in lines), lines
    runs = [value for op, value in dockerfile_instructions() if op == "RUN" and "pip install" in value]
    assert runs and all("--no-deps" in run for run in runs), "pip must not resolve unpinned versions"


def test_dockerfile_pinned_runtime_deps_cover_pyproject() -> None:
    import tomllib

    declared = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["dependencies"]
    names = {re.split(r"[<>=!~ ]", d, maxsplit=1)[0].lower().replace("_", "-") for d in declared}
    pinned_text = (DEPLOY_DIR / "image" / "requirements.txt").read_text()
    pinned = {line.split("==")[0].lower().replace("_", "-") for line in pinned_text.splitlines() if "==" in line}
    assert names <= pinned, f"unpinned in the image: {sorted(names - pinned)}"


def test_dockerfile_runs_the_daemon_as_root_on_purpose() -> None:
    instructions = dockerfile_instructions()
    assert [value for op, value in instructions if op == "USER"] == ["0:0"]
    assert ("ENTRYPOINT", '["gpu-device-plugin"]') in instructions
    assert ("CMD", '["run"]') in instructions
    text = (REPO / "Dockerfile").read_text()
    assert "/var/lib/kubelet/device-plugins" in text, "the reason for root is documented next to USER"


def test_dockerignore_keeps_the_context_small() -> None:
    lines = [line for line in (REPO / ".dockerignore").read_text().splitlines() if not line.startswith("#")]
    assert lines[0] == "*", "everything excluded by default, then re-included"
    for needed in ("!device_plugin/", "!api/", "!pyproject.toml", "!deploy/image/requirements.txt"):
        assert needed in lines


def test_readme_exists_for_the_package_build() -> None:
    # pyproject.toml's readme is copied into the image build; its absence breaks `docker build`.
    assert Path(REPO / "README.md").is_file()
