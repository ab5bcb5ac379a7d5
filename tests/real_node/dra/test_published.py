"""What the real API server and scheduler make of what we publish and ship: the slices of every machine, the
deploy/dra objects, the admission policy and RBAC under the driver's pod-bound token, and DeviceClass
selectors that a foreign device cannot break."""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from device_plugin.dra.inventory import build_devices
from device_plugin.dra_helper.api.slices import API_VERSIONS, build_slices
from device_plugin.nvml.fake.catalog import shipped_machine_names
from device_plugin.nvml.fake.machine import FakeNvml
from device_plugin.topology.build import build_topology
from testbed.realnode.cluster import RealCluster
from testbed.realnode.kubectl import Kubectl, KubectlError
from testbed.realnode.manifests import ROOT
from testbed.realnode.our_daemon import OurDaemon
from testbed.realnode.pods import busybox_pod, run_to_end, start_running
from tests.real_node.dra.conftest import DRIVER, EXAMPLES, allocated, claim_of, slices


def _slices_of(machine: str, node: str, version: str) -> list[dict[str, object]]:
    fake = FakeNvml.from_machine(machine)
    devices, _ = build_devices(fake, build_topology(fake))
    return build_slices(devices, node_name=node, driver_name=DRIVER, generation=1, api_version=version)


@pytest.mark.parametrize("machine", shipped_machine_names())
def test_the_slices_of_every_shipped_machine_are_accepted_strictly_and_without_warnings(
    deployed: RealCluster, machine: str
) -> None:
    """Server-side dry run with strict field validation, in every API version the driver may write."""
    objects = [o for v in API_VERSIONS for o in _slices_of(machine, f"check-{machine}", v)]
    manifest = json.dumps({"apiVersion": "v1", "kind": "List", "items": objects})
    done = subprocess.run(
        [str(deployed.binaries.kubectl), f"--kubeconfig={deployed.kubectl.kubeconfig}", "create",
         "--dry-run=server", "--validate=strict", "-f", "-"],
        input=manifest, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    # The betas' own deprecation notice is the server's word on the version, not on our objects (v1 has none).
    warnings = [w for w in done.stderr.splitlines() if w.startswith("Warning") and " is deprecated in v1." not in w]
    assert warnings == [], done.stderr
    assert "resource.k8s.io/v1 ResourceSlice" not in done.stderr
    assert done.stdout.count("created (server dry run)") == len(objects)


def test_deploy_dra_applies_as_shipped_without_warnings(deployed: RealCluster) -> None:
    done = subprocess.run(
        [str(deployed.binaries.kubectl), f"--kubeconfig={deployed.kubectl.kubeconfig}", "apply", "--server-side",
         "--dry-run=server", "--validate=strict", "-k", str(ROOT / "deploy" / "dra")],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 0 and "Warning" not in done.stderr, done.stderr


def test_under_its_pod_bound_token_the_driver_writes_its_own_nodes_slices_and_nothing_else(
    deployed: RealCluster, dra_driver: Callable[..., OurDaemon]
) -> None:
    driver = dra_driver("--machine", "dgx1-v100")
    assert [s["spec"]["nodeName"] for s in slices(deployed)] == [deployed.node_name]
    as_driver = Kubectl(deployed.binaries.kubectl, Path(driver.env["KUBECONFIG"]))
    foreign = _slices_of("single-gpu", "another-node", "v1")[0]
    with pytest.raises(KubectlError) as policy:
        as_driver.create(json.dumps(foreign))
    assert "may write only ResourceSlices with spec.nodeName" in policy.value.stderr  # the admission policy
    with pytest.raises(KubectlError) as rbac:
        as_driver.get("pods", "-A")
    assert "Forbidden" in rbac.value.stderr or "forbidden" in rbac.value.stderr  # RBAC: no pod reads


def test_a_device_without_our_attributes_under_our_driver_name_breaks_no_claim(
    deployed: RealCluster, dra_driver: Callable[..., OurDaemon]
) -> None:
    """Another writer under our driver name (an old release, a hand-made slice) must not make the class's
    selector raise for every claim: the selectors guard each attribute they read."""
    dra_driver("--machine", "dgx1-v100")
    bare = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": "elsewhere-bare-device"},
        "spec": {
            "driver": DRIVER, "allNodes": True, "pool": {"name": "aaa-listed-first", "generation": 1,
            "resourceSliceCount": 1}, "devices": [{"name": "gpu-0"}],
        },
    }  # fmt: skip
    deployed.kubectl.create(json.dumps(bare))
    time.sleep(2)  # the scheduler's informer holds it by then (without the guards: "CEL runtime error: no such key")
    try:
        done, _ = run_to_end(deployed, busybox_pod("beside-a-bare-device", EXAMPLES, "true", claims={"gpu": "one-gpu"}))
        assert done["status"]["phase"] == "Succeeded", done["status"]
    finally:
        deployed.kubectl.delete("resourceslice", "elsewhere-bare-device")


def test_the_mig_example_claim_gets_a_1g_mig_device(
    deployed: RealCluster, dra_driver: Callable[..., OurDaemon]
) -> None:
    dra_driver("--machine", "a100-mig-7x1g")
    template = ROOT / "deploy" / "dra" / "examples" / "mig" / "claim-template.yaml"
    namespace = "gpu-dra-mig-examples"
    deployed.kubectl.run("apply", "--server-side", "-f", str(template.parent / "namespace.yaml"), "-f", str(template))
    name = next(d["metadata"]["name"] for d in _documents(template) if d["kind"] == "ResourceClaimTemplate")
    try:
        start_running(deployed, busybox_pod("mig", namespace, "sleep 3600", claims={"mig": name}))
        claim = claim_of(deployed, "mig", namespace)
        got = allocated(claim)
        assert len(got) == 1 and "-mig-" in got[0], got
    finally:
        deployed.kubectl.run("delete", "namespace", namespace, "--wait=true", timeout_s=120)


def _documents(path: Path) -> list[dict[str, object]]:
    import yaml

    return [d for d in yaml.safe_load_all(path.read_text()) if d]
