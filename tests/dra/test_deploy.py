"""deploy/dra: every object valid for Kubernetes 1.34+, RBAC least privilege, the example claims as documented."""

from __future__ import annotations

import re
from pathlib import Path

import kubernetes_validate
import pytest

from device_plugin.config.schema import DEFAULT_DRA_DRIVER_NAME
from device_plugin.core.names import OWN_DOMAIN
from device_plugin.dra.inventory import build_devices
from device_plugin.dra.ranked_sets import GROUPINGS, LETTERS
from device_plugin.nvml.fake.machine import FakeNvml
from tests.allocation.machines import topology_of
from tests.deploy.kustomize import build as render

DRA_DIR = Path(__file__).resolve().parents[2] / "deploy" / "dra"
OBJECTS = render(DRA_DIR)
EXAMPLES = render(DRA_DIR / "examples")
VERSIONS = ("1.34", "1.35", "1.36", "1.37")


def claim_template(name: str) -> dict:
    (template,) = [o for o in EXAMPLES if o["kind"] == "ResourceClaimTemplate" and o["metadata"]["name"] == name]
    return template


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize(
    "obj", OBJECTS + EXAMPLES, ids=[f"{o['kind']}/{o['metadata']['name']}" for o in OBJECTS + EXAMPLES]
)
def test_every_object_validates_strictly(obj: dict, version: str) -> None:
    kubernetes_validate.validate(obj, version, strict=True)


def test_rbac_grants_exactly_slices_write_claims_read_and_nodes_get() -> None:
    """Claims: get (Prepare's read) and list (restoring damaged checkpoint entries at start); nothing else."""
    (role,) = [o for o in OBJECTS if o["kind"] == "ClusterRole"]
    grants = {
        (g, r, v) for rule in role["rules"] for g in rule["apiGroups"] for r in rule["resources"] for v in rule["verbs"]
    }
    slices = {("resource.k8s.io", "resourceslices", v) for v in ("get", "list", "watch", "create", "update", "delete")}
    claims = {("resource.k8s.io", "resourceclaims", v) for v in ("get", "list")}
    assert grants == slices | claims | {("", "nodes", "get")}


def test_the_daemonset_runs_dra_mode_with_the_kubelet_plugin_dirs_node_name_and_the_rbac_account() -> None:
    (daemonset,) = [o for o in OBJECTS if o["kind"] == "DaemonSet"]
    pod = daemonset["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    env = {e["name"]: e.get("value", e.get("valueFrom")) for e in container["env"]}
    assert env["PLUGIN_MODE"] == "dra"
    assert env["NODE_NAME"] == {"fieldRef": {"fieldPath": "spec.nodeName"}}
    # the kubelet directory is DEVICE_PLUGIN_DIR's parent: the sockets land where the kubelet looks
    assert env["DEVICE_PLUGIN_DIR"].rsplit("/", 1)[0] == "/var/lib/kubelet"
    host_paths = {v["name"]: v["hostPath"]["path"] for v in pod["volumes"] if "hostPath" in v}
    mounts = {m["name"]: m["mountPath"] for m in container["volumeMounts"]}
    for name in ("plugins-registry", "plugins"):
        assert mounts[name] == host_paths[name]
    assert {host_paths["plugins-registry"], host_paths["plugins"]} == {
        "/var/lib/kubelet/plugins_registry",
        "/var/lib/kubelet/plugins",
    }
    assert pod["automountServiceAccountToken"] is True  # the driver needs its token for the API server
    (binding,) = [o for o in OBJECTS if o["kind"] == "ClusterRoleBinding"]
    (subject,) = binding["subjects"]
    assert (subject["name"], subject["namespace"]) == (pod["serviceAccountName"], daemonset["metadata"]["namespace"])


def test_the_best_set_claim_asks_for_four_gpus_sharing_one_best_set4_value() -> None:
    (template,) = [
        o
        for o in EXAMPLES
        if o["kind"] == "ResourceClaimTemplate" and o["metadata"]["name"] == "four-best-connected-gpus"
    ]
    devices = template["spec"]["spec"]["devices"]
    assert devices["requests"][0]["exactly"]["count"] == 4
    assert devices["constraints"] == [{"requests": ["gpus"], "matchAttribute": f"{OWN_DOMAIN}/bestSet4"}]


@pytest.mark.parametrize(("name", "size"), [("two-gpus-best-effort", 2), ("four-gpus-best-effort", 4)])
def test_the_first_available_claims_try_every_ranked_grouping_then_one_numa_node_then_any(name: str, size: int) -> None:
    template = claim_template(name)
    devices = template["spec"]["spec"]["devices"]
    (request,) = devices["requests"]
    alternatives = request["firstAvailable"]
    letters = LETTERS[: GROUPINGS[size]]
    assert [s["name"] for s in alternatives] == [
        *(f"ranked-{letter.lower()}" for letter in letters),
        "one-numa-node",
        f"any-{size}",
    ]
    assert len(alternatives) <= 8  # the API's limit on firstAvailable
    assert {(s["count"], s["deviceClassName"]) for s in alternatives} == {(size, DEFAULT_DRA_DRIVER_NAME)}
    constrained = {c["requests"][0]: c["matchAttribute"] for c in devices["constraints"]}
    assert constrained == {
        **{f"gpus/ranked-{letter.lower()}": f"{OWN_DOMAIN}/rankedSet{size}{letter}" for letter in letters},
        "gpus/one-numa-node": "resource.kubernetes.io/numaNode",
    }


def test_the_examples_name_only_attributes_the_driver_publishes() -> None:
    devices, _ = build_devices(FakeNvml.from_machine("dgx1-v100"), topology_of("dgx1-v100"))
    published = {name for d in devices for name, _, _ in d.attributes}
    templates = [o for o in EXAMPLES if o["kind"] == "ResourceClaimTemplate"]
    named = {c["matchAttribute"] for o in templates for c in o["spec"]["spec"]["devices"].get("constraints", [])}
    selected = {
        f"{domain}/{name}"
        for o in templates
        for request in o["spec"]["spec"]["devices"]["requests"]
        for sub in request.get("firstAvailable", [])
        for selector in sub.get("selectors", [])
        for domain, name in re.findall(r'device\.attributes\["([\w.-]+)"\]\.(\w+)', selector["cel"]["expression"])
    }
    assert selected, "the one-GPU claim selects on singleGPURank"
    assert named | selected <= published


def test_the_one_gpu_claim_tries_the_single_gpu_ranks_in_order_then_any() -> None:
    (request,) = claim_template("one-gpu")["spec"]["spec"]["devices"]["requests"]
    alternatives = request["firstAvailable"]
    assert len(alternatives) == 8  # the API's limit: ranks 0-6, then any GPU
    for rank, sub in enumerate(alternatives[:-1]):
        (selector,) = sub["selectors"]
        expression = " ".join(selector["cel"]["expression"].split())
        attributes = f'device.attributes["{OWN_DOMAIN}"]'
        assert expression == f'"singleGPURank" in {attributes} && {attributes}.singleGPURank == {rank}'
    assert "selectors" not in alternatives[-1]
    assert {(s["count"], s["deviceClassName"]) for s in alternatives} == {(1, DEFAULT_DRA_DRIVER_NAME)}


def test_the_eight_gpu_claim_tries_a_best_8_set_then_any_8() -> None:
    devices = claim_template("eight-gpus-best-effort")["spec"]["spec"]["devices"]
    (request,) = devices["requests"]
    assert [(s["name"], s["count"]) for s in request["firstAvailable"]] == [("best-set", 8), ("any-8", 8)]
    assert devices["constraints"] == [{"requests": ["gpus/best-set"], "matchAttribute": f"{OWN_DOMAIN}/bestSet8"}]


def test_the_examples_live_apart_from_the_driver_in_their_own_namespace_with_a_pod_for_each_claim() -> None:
    assert not [o for o in OBJECTS if o["kind"] in ("ResourceClaimTemplate", "Pod")]  # not in deploy/dra
    namespaced = [o for o in EXAMPLES if o["kind"] != "Namespace"]
    assert {o["metadata"]["namespace"] for o in namespaced} == {"gpu-dra-examples"}
    assert [o["metadata"]["name"] for o in EXAMPLES if o["kind"] == "Namespace"] == ["gpu-dra-examples"]
    templates = {o["metadata"]["name"] for o in EXAMPLES if o["kind"] == "ResourceClaimTemplate"}
    used = set()
    for pod in (o for o in EXAMPLES if o["kind"] == "Pod"):
        (claim,) = pod["spec"]["resourceClaims"]
        used.add(claim["resourceClaimTemplateName"])
        (container,) = pod["spec"]["containers"]
        assert container["resources"]["claims"] == [{"name": claim["name"]}]
    assert used == templates


def test_the_device_class_selects_our_default_driver_name_not_nvidias() -> None:
    (device_class,) = [
        o for o in OBJECTS if o["kind"] == "DeviceClass" and o["metadata"]["name"] == DEFAULT_DRA_DRIVER_NAME
    ]
    (selector,) = device_class["spec"]["selectors"]
    assert f'device.driver == "{DEFAULT_DRA_DRIVER_NAME}"' in selector["cel"]["expression"]
    assert "nvidia.com" not in selector["cel"]["expression"]


@pytest.mark.parametrize("doc", ["docs/dra.md"])  # the README shows none: it links to docs/dra.md
def test_the_docs_show_the_shipped_claim_templates_verbatim(doc: str) -> None:
    import re

    import yaml

    text = (DRA_DIR.parents[1] / doc).read_text()
    blocks = [yaml.safe_load(b) for b in re.findall(r"```yaml\n(.*?)```", text, flags=re.DOTALL)]
    shown = [b for b in blocks if isinstance(b, dict) and b.get("kind") == "ResourceClaimTemplate"]
    every_set = EXAMPLES + render(DRA_DIR / "examples" / "mig")
    shipped = {o["metadata"]["name"]: o for o in every_set if o["kind"] == "ResourceClaimTemplate"}
    assert shown and all(b == shipped.get(b["metadata"]["name"]) for b in shown)  # each one verbatim
    if doc == "docs/dra.md":
        assert len(shown) == len(shipped)  # the DRA page shows every one
