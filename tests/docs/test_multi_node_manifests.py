"""docs/multi-node.md's Kueue and JobSet manifests, checked offline: each against the fields of its API it
uses (a structural schema per kind, unknown keys refused), and together against what the plugin writes on
the simulated GB200 NVL72 tray (the clique label and the flavor's node labels are real labels of ours)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

from device_plugin.nvml.fake.machine import FakeNvml
from device_plugin.observability.labels import compute_labels

DOC = Path(__file__).resolve().parents[2] / "docs" / "multi-node.md"
TRAY = "gb200-nvl72-tray-a"
CLIQUE = "nvidia.com/gpu.clique"
HOSTNAME = "kubernetes.io/hostname"

_OBJ: dict[str, Any] = {"type": "object"}
_STR: dict[str, Any] = {"type": "string", "minLength": 1}
_LABELS: dict[str, Any] = {"type": "object", "additionalProperties": {"type": "string"}}


def _strict(properties: dict[str, Any], required: tuple[str, ...] = ()) -> dict[str, Any]:
    return {"type": "object", "properties": properties, "required": list(required), "additionalProperties": False}


_META = _strict({"name": _STR, "namespace": _STR, "labels": _LABELS, "annotations": _LABELS}, ("name",))
_CONTAINER = _strict(
    {
        "name": _STR,
        "image": _STR,
        "command": {"type": "array", "items": {"type": "string"}},
        "resources": _strict({"limits": {"type": "object", "additionalProperties": {"type": ["integer", "string"]}}}),
    },
    ("name", "image"),
)
_POD_TEMPLATE = _strict(
    {
        "metadata": _strict({"labels": _LABELS, "annotations": _LABELS}),
        "spec": _strict(
            {"restartPolicy": {"enum": ["Never", "OnFailure"]}, "containers": {"type": "array", "items": _CONTAINER}},
            ("containers",),
        ),
    },
    ("spec",),
)
_JOB_SPEC = _strict(
    {
        "parallelism": {"type": "integer", "minimum": 1},
        "completions": {"type": "integer", "minimum": 1},
        "backoffLimit": {"type": "integer", "minimum": 0},
        "template": _POD_TEMPLATE,
    },
    ("template",),
)
SCHEMAS: dict[tuple[str, str], dict[str, Any]] = {
    ("kueue.x-k8s.io/v1beta2", "Topology"): _strict(
        {
            "apiVersion": _STR,
            "kind": _STR,
            "metadata": _META,
            "spec": _strict(
                {
                    "levels": {
                        "type": "array",
                        "minItems": 1,
                        "maxItems": 16,
                        "items": _strict({"nodeLabel": _STR}, ("nodeLabel",)),
                    }
                },
                ("levels",),
            ),
        },
        ("apiVersion", "kind", "metadata", "spec"),
    ),
    ("kueue.x-k8s.io/v1beta2", "ResourceFlavor"): _strict(
        {
            "apiVersion": _STR,
            "kind": _STR,
            "metadata": _META,
            "spec": _strict({"nodeLabels": _LABELS, "topologyName": _STR}),
        },
        ("apiVersion", "kind", "metadata"),
    ),
    ("kueue.x-k8s.io/v1beta2", "ClusterQueue"): _strict(
        {
            "apiVersion": _STR,
            "kind": _STR,
            "metadata": _META,
            "spec": _strict(
                {
                    "namespaceSelector": _OBJ,
                    "resourceGroups": {
                        "type": "array",
                        "items": _strict(
                            {
                                "coveredResources": {"type": "array", "items": _STR},
                                "flavors": {
                                    "type": "array",
                                    "items": _strict(
                                        {
                                            "name": _STR,
                                            "resources": {
                                                "type": "array",
                                                "items": _strict(
                                                    {"name": _STR, "nominalQuota": {"type": ["integer", "string"]}},
                                                    ("name", "nominalQuota"),
                                                ),
                                            },
                                        },
                                        ("name", "resources"),
                                    ),
                                },
                            },
                            ("coveredResources", "flavors"),
                        ),
                    },
                }
            ),
        },
        ("apiVersion", "kind", "metadata", "spec"),
    ),
    ("kueue.x-k8s.io/v1beta2", "LocalQueue"): _strict(
        {
            "apiVersion": _STR,
            "kind": _STR,
            "metadata": _META,
            "spec": _strict({"clusterQueue": _STR}, ("clusterQueue",)),
        },
        ("apiVersion", "kind", "metadata", "spec"),
    ),
    ("jobset.x-k8s.io/v1alpha2", "JobSet"): _strict(
        {
            "apiVersion": _STR,
            "kind": _STR,
            "metadata": _META,
            "spec": _strict(
                {
                    "replicatedJobs": {
                        "type": "array",
                        "minItems": 1,
                        "items": _strict(
                            {
                                "name": _STR,
                                "replicas": {"type": "integer", "minimum": 1},
                                "template": _strict({"spec": _JOB_SPEC}, ("spec",)),
                            },
                            ("name", "template"),
                        ),
                    }
                },
                ("replicatedJobs",),
            ),
        },
        ("apiVersion", "kind", "metadata", "spec"),
    ),
}


def manifests() -> list[dict[str, Any]]:
    blocks = re.findall(r"^```yaml\n(.*?)^```", DOC.read_text(encoding="utf-8"), flags=re.DOTALL | re.MULTILINE)
    return [doc for doc in (yaml.safe_load(block) for block in blocks) if "apiVersion" in doc]


MANIFESTS = manifests()


def by_kind(kind: str) -> list[dict[str, Any]]:
    return [m for m in MANIFESTS if m["kind"] == kind]


@pytest.fixture(scope="module")
def tray_labels() -> dict[str, str]:
    return compute_labels(FakeNvml.from_machine(TRAY))


def test_the_page_shows_each_kind() -> None:
    assert sorted({m["kind"] for m in MANIFESTS}) == [
        "ClusterQueue",
        "JobSet",
        "LocalQueue",
        "ResourceFlavor",
        "Topology",
    ]


@pytest.mark.parametrize("manifest", MANIFESTS, ids=[f"{m['kind']}-{m['metadata']['name']}" for m in MANIFESTS])
def test_each_manifest_has_only_fields_of_its_api(manifest: dict[str, Any]) -> None:
    jsonschema.validate(manifest, SCHEMAS[(manifest["apiVersion"], manifest["kind"])])


def test_topology_levels_are_labels_the_plugin_writes_with_hostname_last(tray_labels: dict[str, str]) -> None:
    (topology,) = by_kind("Topology")
    levels = [level["nodeLabel"] for level in topology["spec"]["levels"]]
    assert levels[0] == CLIQUE and CLIQUE in tray_labels
    assert len(set(levels)) == len(levels)
    assert HOSTNAME not in levels[:-1]
    assert all(level in tray_labels or level == HOSTNAME for level in levels)


def test_the_flavor_selects_the_tray_and_names_the_topology(tray_labels: dict[str, str]) -> None:
    (flavor,) = by_kind("ResourceFlavor")
    assert flavor["spec"]["topologyName"] in {t["metadata"]["name"] for t in by_kind("Topology")}
    assert flavor["spec"]["nodeLabels"].items() <= tray_labels.items()


def test_queues_reference_what_the_page_defines() -> None:
    flavors = {f["metadata"]["name"] for f in by_kind("ResourceFlavor")}
    (cluster_queue,) = by_kind("ClusterQueue")
    for group in cluster_queue["spec"]["resourceGroups"]:
        assert "nvidia.com/gpu" in group["coveredResources"]
        assert {f["name"] for f in group["flavors"]} <= flavors
    local_queues = {(q["metadata"]["namespace"], q["metadata"]["name"]) for q in by_kind("LocalQueue")}
    assert {q["spec"]["clusterQueue"] for q in by_kind("LocalQueue")} == {cluster_queue["metadata"]["name"]}
    for jobset in by_kind("JobSet"):
        queue = jobset["metadata"].get("labels", {}).get("kueue.x-k8s.io/queue-name")
        if queue is not None:
            assert (jobset["metadata"]["namespace"], queue) in local_queues


def test_jobsets_keep_pods_in_one_clique_and_fit_a_tray(tray_labels: dict[str, str]) -> None:
    for jobset in by_kind("JobSet"):
        exclusive = jobset["metadata"].get("annotations", {}).get("alpha.jobset.sigs.k8s.io/exclusive-topology")
        for job in jobset["spec"]["replicatedJobs"]:
            pod = job["template"]["spec"]["template"]
            required = pod.get("metadata", {}).get("annotations", {}).get("kueue.x-k8s.io/podset-required-topology")
            assert CLIQUE in (exclusive, required), jobset["metadata"]["name"]
            for container in pod["spec"]["containers"]:
                assert (
                    1
                    <= int(container["resources"]["limits"]["nvidia.com/gpu"])
                    <= int(tray_labels["nvidia.com/gpu.count"])
                )


@pytest.mark.parametrize("machine", ["gb200-nvl72-tray-a", "gb200-nvl72-tray-b"])
def test_the_label_lines_shown_are_what_the_plugin_writes(machine: str) -> None:
    shown = re.search(rf"labels --machine {machine} \| grep clique\n\s+(\S+)\n", DOC.read_text(encoding="utf-8"))
    assert shown is not None
    key, _, value = shown.group(1).partition("=")
    assert compute_labels(FakeNvml.from_machine(machine))[key] == value
