"""`gpu-device-plugin run` in mode dra: open NVML and the API client, serve the DRA driver until a signal.

Boundary: process wiring only (the command line's choices, exit codes, signals); DraDriver does the
work. The node name comes from NODE_NAME (the downward API's spec.nodeName); the API server from
$KUBECONFIG when set, else the pod's service account.
"""

from __future__ import annotations

import argparse
import logging
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Protocol

from kubernetes.config.config_exception import ConfigException
from prometheus_client import CollectorRegistry

from device_plugin.config.model import Config, config_file_path
from device_plugin.config.watch import ConfigFileWatch
from device_plugin.core.errors import NvmlUnavailableError, PluginError
from device_plugin.dra.driver import DraDriver
from device_plugin.dra.kube import api_client
from device_plugin.dra.reporting import dra_endpoint, dra_labels, dra_metrics, refresh_dra_labels
from device_plugin.health.fake_events import FakeEventsTail
from device_plugin.nvml.backends import open_backend
from device_plugin.nvml.fake import FakeNvml
from device_plugin.observability.http_endpoint import EndpointBindError

log = logging.getLogger("device_plugin")


class Signals(Protocol):
    on_hangup: Callable[[], None] | None

    def wait(self) -> str: ...


def serve(args: argparse.Namespace, config: Config, signals: Signals) -> int:
    node_name = os.environ.get("NODE_NAME", "")
    if not node_name:
        log.error("mode dra: NODE_NAME is not set; set it from the downward API (fieldRef spec.nodeName)")
        return 2
    try:
        client = api_client()
    except ConfigException as error:
        log.error("mode dra: no API server to talk to (KUBECONFIG or in-cluster service account): %s", error)
        return 2
    try:
        backend = open_backend(args.machine)
    except NvmlUnavailableError as error:
        log.error("NVML is unavailable: %s. Is the NVIDIA driver installed and this a GPU node?", error)
        return 1
    except PluginError as error:
        log.error("cannot load machine %s: %s", args.machine, error)
        return 2
    try:
        driver = DraDriver(backend, config, client=client, node_name=node_name)
        driver.start()
    except PluginError as error:
        log.error("cannot start the DRA driver: %s", error)
        backend.close()
        return 1
    registry = CollectorRegistry()
    dra_metrics(registry, backend, driver, config)
    endpoint = dra_endpoint(driver, config, registry)
    try:
        if endpoint is not None:
            endpoint.start()
    except EndpointBindError as error:  # no probes would mean a pod the kubelet cannot judge: refuse
        log.error("%s; set gpuDevicePlugin.metricsAddress (METRICS_ADDRESS) to a free address; exiting", error)
        driver.stop()
        backend.close()
        return 1
    labels = dra_labels(backend, config)
    if labels is not None:
        driver.on_devices_changed = lambda: refresh_dra_labels(backend, config, labels)
    tail = None
    if getattr(args, "fake_events", None) and isinstance(backend, FakeNvml):
        tail = FakeEventsTail(Path(args.fake_events), backend.faults.inject)
        tail.start()
    config_file = config_file_path(args.config, os.environ)
    watch = ConfigFileWatch(config_file, driver.request_rescan) if config_file is not None else None
    if watch is not None:
        watch.start()
    signals.on_hangup = driver.request_rescan
    log.info("DRA driver %s serving node %s", driver.driver_name, node_name)
    signal_name = signals.wait()
    started = time.monotonic()
    log.info("received %s; deregistering and deleting our ResourceSlices", signal_name)
    driver.stop()
    for stoppable in (endpoint, watch, tail):
        if stoppable is not None:
            stoppable.stop()
    backend.close()
    log.info("stopped in %.2f s", time.monotonic() - started)
    return 0
