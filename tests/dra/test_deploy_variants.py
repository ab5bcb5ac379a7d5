"""deploy/dra's variants and example sets: every kustomization under deploy/dra renders (real kustomize) to
objects valid for Kubernetes 1.34-1.37; the extended-resource variant maps nvidia.com/gpu to whole GPUs and
splits the nodes from the device plugin's by one label; the MIG class and example select what MIG nodes
publish; each example set lives in a namespace of its own with a Pod for each claim."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml

from device_plugin.config.schema import DEFAULT_DRA_DRIVER_NAME
from device_plugin.core.names import GPU_RESOURCE, OWN_DOMAIN
from tests.deploy.kustomize import Rendered
from tests.dra.machine_devices import devices_of

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"
RENDERED = Rendered(DEPLOY)  # each kustomization rendered when a test first reads it
KUSTOMIZATIONS = [name for name in RENDERED if name == "dra" or name.startswith("dra/")]
EXAMPLE_SETS = [name for name in KUSTOMIZATIONS if "/examples" in name]
VERSIONS = ("1.34", "1.35", "1.36", "1.37")
MODE_LABEL = f"{OWN_DOMAIN}/mode"
MIG_MACHINES = ("a100-mig-7x1g", "h100-mig-mixed")


def of_kind(objects: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [o for o in objects if o["kind"] == kind]


def named(objects: list[dict[str, Any]], kind: str, name: str) -> dict[str, Any]:
    (obj,) = [o for o in of_kind(objects, kind) if o["metadata"]["name"] == name]
    return obj


def pod_spec(objects: list[dict[str, Any]]) -> dict[str, Any]:
    (daemonset,) = of_kind(objects, "DaemonSet")
    return daemonset["spec"]["template"]["spec"]


def test_every_kustomization_under_deploy_dra_is_found() -> None:
    examples = {"dra/examples", "dra/examples/mig", "dra/examples/gpu-count", "dra/examples/memory-shares"}
    assert {"dra", "dra/driver", "dra/extended-resource", "dra/rolling-update", *examples} <= set(KUSTOMIZATIONS)


def _strategy_and_names(objects: list[dict[str, Any]]) -> tuple[dict[str, Any], str]:
    (daemonset,) = of_kind(objects, "DaemonSet")
    (container,) = daemonset["spec"]["template"]["spec"]["containers"]
    env = {e["name"]: e.get("value") for e in container.get("env", [])}
    return daemonset["spec"]["updateStrategy"], env.get("SOCKET_NAMES") or "fixed"


DRIVERS = [n for n in KUSTOMIZATIONS if of_kind(RENDERED[n], "DaemonSet")]


@pytest.mark.parametrize("name", DRIVERS)
def test_only_the_rolling_variant_surges_and_it_names_sockets_per_pod(name: str) -> None:
    """A surge with fixed socket names would stall on the instance lock; per-instance names without a surge
    gain nothing. The rolling variant differs from deploy/dra in exactly these two things."""
    strategy, names = _strategy_and_names(RENDERED[name])
    if name == "dra/rolling-update":
        assert strategy == {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 0, "maxSurge": 1}}
        assert names == "per-instance"
        rolling, driver = RENDERED[name], RENDERED["dra"]
        changed = [o["kind"] for o, before in zip(rolling, driver, strict=True) if o != before]
        assert changed == ["DaemonSet"]
    else:
        assert strategy == {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 1, "maxSurge": 0}}
        assert names == "fixed"


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("name", KUSTOMIZATIONS)
def test_every_object_of_every_dra_kustomization_validates_strictly(name: str, version: str) -> None:
    for obj in RENDERED[name]:
        kubernetes_validate.validate(obj, version, strict=True)


def test_the_extended_resource_variant_maps_nvidia_gpu_to_whole_gpus_only() -> None:
    variant, driver = RENDERED["dra/extended-resource"], RENDERED["dra"]
    mapped = [c for c in of_kind(variant, "DeviceClass") if "extendedResourceName" in c["spec"]]
    (gpu_class,) = mapped  # one class per name: the scheduler picks at random among several
    assert gpu_class["spec"]["extendedResourceName"] == GPU_RESOURCE
    name = gpu_class["metadata"]["name"]
    assert name == DEFAULT_DRA_DRIVER_NAME  # the whole-GPU class: MIG devices are not counted as nvidia.com/gpu
    assert gpu_class["spec"]["selectors"] == named(driver, "DeviceClass", name)["spec"]["selectors"]
    assert '.type == "gpu"' in gpu_class["spec"]["selectors"][0]["cel"]["expression"]


def test_the_extended_resource_variant_changes_only_the_class_and_where_the_driver_runs() -> None:
    variant, driver = RENDERED["dra/extended-resource"], RENDERED["dra"]
    assert [(o["kind"], o["metadata"]["name"]) for o in variant] == [(o["kind"], o["metadata"]["name"]) for o in driver]
    changed = [o["kind"] for o, before in zip(variant, driver, strict=True) if o != before]
    assert changed == ["DaemonSet", "DeviceClass"]
    spec, before = pod_spec(variant), pod_spec(driver)
    assert spec["nodeSelector"] == {MODE_LABEL: "dra"}
    assert {k: v for k, v in spec.items() if k != "nodeSelector"} == before


def test_no_node_runs_the_device_plugin_and_the_count_serving_driver_together() -> None:
    """Both select the same label key with different values: a node's label has one value."""
    device_plugin = pod_spec(RENDERED["overlays/device-plugin-pool"])
    dra = pod_spec(RENDERED["dra/extended-resource"])
    assert device_plugin["nodeSelector"] == {MODE_LABEL: "device-plugin"}
    assert dra["nodeSelector"] == {MODE_LABEL: "dra"}
    assert device_plugin["affinity"] == dra["affinity"]  # both still only on GPU nodes


def test_the_mig_class_selects_this_drivers_mig_devices_and_the_gpu_class_excludes_them() -> None:
    classes = {
        c["metadata"]["name"]: c["spec"]["selectors"][0]["cel"]["expression"]
        for c in of_kind(RENDERED["dra"], "DeviceClass")
    }
    ours = f'device.attributes["{DEFAULT_DRA_DRIVER_NAME}"]'
    guarded = f'device.driver == "{DEFAULT_DRA_DRIVER_NAME}" && "type" in {ours} && {ours}.type'
    assert classes == {
        DEFAULT_DRA_DRIVER_NAME: f'{guarded} == "gpu"',
        f"mig.{OWN_DOMAIN}": f'{guarded} == "mig"',
    }


@pytest.mark.parametrize("machine", MIG_MACHINES)
def test_the_mig_example_asks_for_a_profile_that_mig_nodes_publish(machine: str) -> None:
    objects = RENDERED["dra/examples/mig"]
    (template,) = of_kind(objects, "ResourceClaimTemplate")
    (request,) = template["spec"]["spec"]["devices"]["requests"]
    assert request["exactly"]["deviceClassName"] == f"mig.{OWN_DOMAIN}"
    (selector,) = request["exactly"]["selectors"]
    match = re.fullmatch(
        rf'"profile" in device\.attributes\["{re.escape(DEFAULT_DRA_DRIVER_NAME)}"\] && '
        rf'device\.attributes\["{re.escape(DEFAULT_DRA_DRIVER_NAME)}"\]\.profile\.startsWith\("([^"]+)"\)',
        selector["cel"]["expression"],
    )
    assert match is not None
    devices, _ = devices_of(machine)
    profiles = [dict((a[0], a[2]) for a in d.attributes).get("profile", "") for d in devices]
    assert any(p.startswith(match.group(1)) for p in profiles)


@pytest.mark.parametrize("name", EXAMPLE_SETS)
def test_each_example_set_has_its_own_namespace_and_a_pod_using_each_claim(name: str) -> None:
    objects = RENDERED[name]
    (namespace,) = [o["metadata"]["name"] for o in of_kind(objects, "Namespace")]
    others = {o["metadata"]["name"] for n in EXAMPLE_SETS if n != name for o in of_kind(RENDERED[n], "Namespace")}
    assert namespace not in others and namespace != pod_spec(RENDERED["dra"]).get("namespace", "gpu-device-plugin")
    assert {o["metadata"]["namespace"] for o in objects if o["kind"] != "Namespace"} == {namespace}
    pods = of_kind(objects, "Pod")
    assert pods
    used = {c["resourceClaimTemplateName"] for p in pods for c in p["spec"].get("resourceClaims", [])}
    assert used == {t["metadata"]["name"] for t in of_kind(objects, "ResourceClaimTemplate")}


def test_the_count_examples_ask_for_nvidia_gpu_and_write_no_claim() -> None:
    pods = of_kind(RENDERED["dra/examples/gpu-count"], "Pod")
    assert len(pods) == 2
    for pod in pods:
        assert "resourceClaims" not in pod["spec"]
        assert all(GPU_RESOURCE in c["resources"]["limits"] for c in pod["spec"]["containers"])


DOC = (DEPLOY.parent / "docs" / "dra.md").read_text()


def test_the_dra_page_shows_shipped_objects_verbatim() -> None:
    """Every DeviceClass, Pod and ResourceClaimTemplate block of docs/dra.md is one that some kustomization
    under deploy/dra renders, exactly; the count variant's class and a count Pod are among them."""
    blocks = [yaml.safe_load(b) for b in re.findall(r"```yaml\n(.*?)```", DOC, flags=re.DOTALL)]
    shown = [
        b for b in blocks if isinstance(b, dict) and b.get("kind") in ("DeviceClass", "Pod", "ResourceClaimTemplate")
    ]
    rendered = [o for objects in RENDERED.values() for o in objects]
    assert shown and all(b in rendered for b in shown)
    assert {(b["kind"], b["metadata"]["name"]) for b in shown} >= {
        ("DeviceClass", DEFAULT_DRA_DRIVER_NAME),
        ("Pod", "two-gpus-by-count"),
        ("ResourceClaimTemplate", "one-small-mig-device"),
    }
    (count_class,) = [b for b in shown if b["kind"] == "DeviceClass"]
    assert count_class["spec"]["extendedResourceName"] == GPU_RESOURCE


def test_the_memory_shares_page_shows_the_shipped_share_template_verbatim() -> None:
    page = (DEPLOY.parent / "docs" / "sharing-dra.md").read_text()
    blocks = [yaml.safe_load(b) for b in re.findall(r"```yaml\n(.*?)```", page, flags=re.DOTALL)]
    (shown,) = [b for b in blocks if isinstance(b, dict) and b.get("kind") == "ResourceClaimTemplate"]
    assert shown in RENDERED["dra/examples/memory-shares"]


def test_every_kustomization_the_dra_page_applies_exists() -> None:
    named = set(re.findall(r"kubectl (?:apply|delete) -k (deploy/[\w./-]+)", DOC))
    assert {"deploy/dra", "deploy/dra/extended-resource", "deploy/overlays/device-plugin-pool"} <= named
    assert [n for n in sorted(named) if not (DEPLOY.parent / n / "kustomization.yaml").is_file()] == []
    example_dirs = {f"deploy/{n}" for n in EXAMPLE_SETS}
    assert all(d.removeprefix("deploy/dra/") in DOC for d in example_dirs)  # each example set is named


def test_the_mps_shares_variant_differs_from_the_driver_only_in_its_share_settings_and_host_folders() -> None:
    """Every path the CDI specs name must be the host's: each folder is mounted at its own host path."""
    shares, driver = RENDERED["dra/mps-shares"], RENDERED["dra"]
    assert [o["kind"] for o, before in zip(shares, driver, strict=True) if o != before] == ["DaemonSet"]
    spec = pod_spec(shares)
    (container,) = spec["containers"]
    env = {e["name"]: e.get("value") for e in container["env"]}
    assert {k: env[k] for k in ("MEMORY_SHARES", "MEMORY_SHARE_ISOLATION", "MPS_ROOT", "CDI_SPEC_DIR")} == {
        "MEMORY_SHARES": "true",
        "MEMORY_SHARE_ISOLATION": "per-process",
        "MPS_ROOT": "/run/gpu-device-plugin/mps",
        "CDI_SPEC_DIR": "/var/run/cdi",
    }
    assert "compute" in env["NVIDIA_DRIVER_CAPABILITIES"].split(",")
    host = {v["name"]: v["hostPath"]["path"] for v in spec["volumes"] if "hostPath" in v}
    mounted = {m["mountPath"]: host.get(m["name"]) for m in container["volumeMounts"]}
    assert mounted["/run/gpu-device-plugin/mps"] == "/run/gpu-device-plugin/mps"
    assert mounted["/var/run/cdi"] == "/var/run/cdi"
