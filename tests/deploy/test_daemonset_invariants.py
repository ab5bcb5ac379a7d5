"""What every rendering's DaemonSet must keep: scheduling, least privilege, probes, resources, updates."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.deploy.conftest import KUSTOMIZATIONS, Rendered, container, only

PLUGIN_DIR = "/var/lib/kubelet/device-plugins"
METRICS_PORT = 2112
ON_GPU_NODES = [k for k in KUSTOMIZATIONS if k != "overlays/fake-gpu"]


def pod_spec(objects: list[dict[str, Any]]) -> dict[str, Any]:
    return only(objects, "DaemonSet")["spec"]["template"]["spec"]


def env(objects: list[dict[str, Any]]) -> dict[str, Any]:
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in container(objects).get("env", [])}


@pytest.mark.parametrize("name", KUSTOMIZATIONS)
def test_scheduled_as_critical_and_onto_tainted_gpu_nodes(rendered: Rendered, name: str) -> None:
    spec = pod_spec(rendered[name])
    assert spec["priorityClassName"] == "system-node-critical"
    tolerations = spec["tolerations"]
    assert {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"} in tolerations
    assert {"key": "CriticalAddonsOnly", "operator": "Exists"} in tolerations


@pytest.mark.parametrize("name", ON_GPU_NODES)
def test_runs_only_on_gpu_nodes_by_either_label(rendered: Rendered, name: str) -> None:
    terms = pod_spec(rendered[name])["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    # One term per label: terms are ORed, expressions inside a term ANDed.
    expressions = [t["matchExpressions"] for t in terms["nodeSelectorTerms"]]
    assert len(expressions) == 2
    for label in ("nvidia.com/gpu.present", "feature.node.kubernetes.io/pci-10de.present"):
        assert [{"key": label, "operator": "In", "values": ["true"]}] in expressions


def test_fake_gpu_runs_only_on_nodes_labelled_for_it(rendered: Rendered) -> None:
    terms = pod_spec(rendered["overlays/fake-gpu"])["affinity"]["nodeAffinity"]
    (term,) = terms["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    assert term["matchExpressions"] == [{"key": "gpu-device-plugin/fake-gpu", "operator": "In", "values": ["true"]}]


POD_RESOURCES_DIR = "/var/lib/kubelet/pod-resources"


@pytest.mark.parametrize("name", KUSTOMIZATIONS)
def test_mounts_the_kubelet_plugin_dir(rendered: Rendered, name: str) -> None:
    volumes = {v["name"]: v for v in pod_spec(rendered[name])["volumes"]}
    mounts = {m["mountPath"]: m for m in container(rendered[name])["volumeMounts"]}
    assert volumes[mounts[PLUGIN_DIR]["name"]]["hostPath"] == {"path": PLUGIN_DIR, "type": "Directory"}
    assert env(rendered[name])["DEVICE_PLUGIN_DIR"] == PLUGIN_DIR
    # Besides it, only NFD's features.d (for the labels file) and the kubelet's pod-resources API (read only,
    # for the GPUs-per-pod metric); the runtime injects /dev/nvidia*.
    labels_dir = str(Path(env(rendered[name])["LABELS_FILE"]).parent)
    assert volumes[mounts[labels_dir]["name"]]["hostPath"] == {"path": labels_dir, "type": "DirectoryOrCreate"}
    pod_resources = mounts[POD_RESOURCES_DIR]
    assert pod_resources["readOnly"] is True
    assert volumes[pod_resources["name"]]["hostPath"] == {"path": POD_RESOURCES_DIR, "type": "DirectoryOrCreate"}
    host_paths = sorted(v["name"] for v in volumes.values() if "hostPath" in v)
    assert host_paths == sorted([mounts[PLUGIN_DIR]["name"], mounts[labels_dir]["name"], pod_resources["name"]])


@pytest.mark.parametrize("name", KUSTOMIZATIONS)
def test_least_privilege(rendered: Rendered, name: str) -> None:
    spec = pod_spec(rendered[name])
    context = container(rendered[name])["securityContext"]
    assert context["allowPrivilegeEscalation"] is False
    assert context["readOnlyRootFilesystem"] is True
    assert context["capabilities"]["drop"] == ["ALL"]
    assert context["seccompProfile"] == {"type": "RuntimeDefault"}
    assert spec["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    assert context.get("privileged", False) is False
    for forbidden in ("hostNetwork", "hostPID", "hostIPC"):
        assert not spec.get(forbidden, False), forbidden
    assert spec["automountServiceAccountToken"] is False


@pytest.mark.parametrize(
    ("name", "added"),
    [(k, ["SYS_ADMIN"] if k == "overlays/mig-mixed" else []) for k in KUSTOMIZATIONS],
    ids=list(KUSTOMIZATIONS),
)
def test_capabilities_added_only_where_mig_monitoring_needs_them(
    rendered: Rendered, name: str, added: list[str]
) -> None:
    assert container(rendered[name])["securityContext"]["capabilities"].get("add", []) == added


@pytest.mark.parametrize("name", KUSTOMIZATIONS)
def test_probes_on_the_metrics_port(rendered: Rendered, name: str) -> None:
    c = container(rendered[name])
    (port,) = c["ports"]
    assert port == {"name": "metrics", "containerPort": METRICS_PORT, "protocol": "TCP"}
    assert c["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "metrics"}
    assert c["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "metrics"}
    assert env(rendered[name])["METRICS_ADDRESS"] == f":{METRICS_PORT}"


@pytest.mark.parametrize("name", KUSTOMIZATIONS)
def test_metrics_are_discoverable(rendered: Rendered, name: str) -> None:
    annotations = only(rendered[name], "DaemonSet")["spec"]["template"]["metadata"]["annotations"]
    assert annotations["prometheus.io/scrape"] == "true"
    assert annotations["prometheus.io/port"] == str(METRICS_PORT)
    service = only(rendered[name], "Service")
    assert service["spec"]["ports"] == [
        {"name": "metrics", "port": METRICS_PORT, "targetPort": "metrics", "protocol": "TCP"}
    ]
    pod_labels = only(rendered[name], "DaemonSet")["spec"]["template"]["metadata"]["labels"]
    assert service["spec"]["selector"].items() <= pod_labels.items()


@pytest.mark.parametrize("name", KUSTOMIZATIONS)
def test_resources_requested_and_memory_limited(rendered: Rendered, name: str) -> None:
    resources = container(rendered[name])["resources"]
    assert set(resources["requests"]) == {"cpu", "memory"}
    # A memory limit bounds a leak; no CPU limit, so throttling never delays an Allocate answer.
    assert set(resources["limits"]) == {"memory"}


SURGING = "overlays/rolling-update"  # per-instance socket names, for kubelets with PR 135437 (docs/upgrade.md)


@pytest.mark.parametrize("name", KUSTOMIZATIONS)
def test_rolling_update_surges_only_with_a_socket_per_pod(rendered: Rendered, name: str) -> None:
    """A surge with the fixed socket name would stall: the new pod waits for the old one's socket, and the
    old one waits for the new one to be Ready. So a surge comes with per-instance names, and only there."""
    strategy = only(rendered[name], "DaemonSet")["spec"]["updateStrategy"]
    names = env(rendered[name]).get("SOCKET_NAMES", "fixed")
    if name == SURGING:
        assert strategy == {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 0, "maxSurge": 1}}
        assert names == "per-instance"
    else:
        assert strategy == {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 1, "maxSurge": 0}}
        assert names == "fixed"


@pytest.mark.parametrize("name", KUSTOMIZATIONS)
def test_the_pod_uid_comes_from_the_downward_api(rendered: Rendered, name: str) -> None:
    assert env(rendered[name]).get("POD_UID") == {"fieldRef": {"fieldPath": "metadata.uid"}}


@pytest.mark.parametrize("name", KUSTOMIZATIONS)
def test_runs_the_daemon_with_the_mounted_config(rendered: Rendered, name: str) -> None:
    c = container(rendered[name])
    assert c["args"][:3] == ["run", "--config", "/etc/gpu-device-plugin/config.yaml"]
    mounts = {m["mountPath"]: m["name"] for m in c["volumeMounts"]}
    volumes = {v["name"]: v for v in pod_spec(rendered[name])["volumes"]}
    configmap = volumes[mounts["/etc/gpu-device-plugin"]]["configMap"]["name"]
    assert any(o["kind"] == "ConfigMap" and o["metadata"]["name"] == configmap for o in rendered[name])


def test_fake_gpu_passes_the_machine_from_its_configmap(rendered: Rendered) -> None:
    objects = rendered["overlays/fake-gpu"]
    c = container(objects)
    assert c["args"][3:] == ["--machine", "$(FAKE_MACHINE)"]
    ref = env(objects)["FAKE_MACHINE"]["configMapKeyRef"]
    machine_map = next(o for o in objects if o["kind"] == "ConfigMap" and o["metadata"]["name"] == ref["name"])
    assert machine_map["data"][ref["key"]]
    assert env(objects)["NVIDIA_VISIBLE_DEVICES"] == "void"


@pytest.mark.parametrize("name", KUSTOMIZATIONS)
def test_everything_in_one_namespace_it_creates(rendered: Rendered, name: str) -> None:
    namespace = only(rendered[name], "Namespace")["metadata"]["name"]
    assert {o["metadata"].get("namespace") for o in rendered[name] if o["kind"] != "Namespace"} == {namespace}
