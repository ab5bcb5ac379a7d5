"""GPUs per pod on /metrics, from the real kubelet's pod-resources API (DRA mode: the claim's CDI devices)."""

from __future__ import annotations

from collections.abc import Callable

from testbed.realnode.cluster import RealCluster
from testbed.realnode.our_daemon import OurDaemon
from testbed.realnode.pods import busybox_pod, delete_and_wait, start_running
from tests.real_node.dra.conftest import DRIVER, EXAMPLES, allocated, claim_of, devices
from tests.real_node.pod_gpus import pod_gpus


def test_metrics_name_the_pod_and_the_uuid_of_the_gpu_its_claim_holds(
    deployed: RealCluster, dra_driver: Callable[..., OurDaemon]
) -> None:
    driver = dra_driver("--machine", "dgx1-v100")
    start_running(deployed, busybox_pod("claims-one", EXAMPLES, "sleep 3600", claims={"gpus": "one-gpu"}))
    (name,) = allocated(claim_of(deployed, "claims-one"))
    uuid = devices(deployed)[name]["attributes"]["uuid"]["string"]
    assert pod_gpus(driver, "claims-one") == {uuid: (EXAMPLES, "main", DRIVER)}
    delete_and_wait(deployed, EXAMPLES, "claims-one")
    assert pod_gpus(driver, "claims-one") == {}
