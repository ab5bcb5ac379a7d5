"""What our /metrics says each pod holds (gpu_device_plugin_pod_gpu_info), for the real-node tests of both modes."""

from __future__ import annotations

from prometheus_client.parser import text_string_to_metric_families

from testbed.realnode.our_daemon import OurDaemon


def pod_gpus(daemon: OurDaemon, pod: str) -> dict[str, tuple[str, str, str]]:
    """uuid -> (namespace, container, resource) of the pod's series, as scraped now."""
    out = {}
    for family in text_string_to_metric_families(daemon.metrics()):
        if family.name == "gpu_device_plugin_pod_gpu_info":
            for sample in family.samples:
                labels = sample.labels
                if labels["pod"] == pod and sample.value == 1:
                    out[labels["uuid"]] = (labels["namespace"], labels["container"], labels["resource"])
    return out
