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
from device_plugin.dra.driver import DraDriver
from device_plugin.dra.kube import api_client
from device_plugin.errors import NvmlUnavailableError, PluginError
from device_plugin.health.fake_events import FakeEventsTail
from device_plugin.nvml.backends import open_backend
from device_plugin.nvml.fake import FakeNvml
from device_plugin.observability.http_endpoint import EndpointProbeResult, HttpEndpoint, parse_metrics_address

log = logging.getLogger("device_plugin")


class Signals(Protocol):
    on_hangup: Callable[[], None] | None

    def wait(self) -> str: ...


def probes(driver: DraDriver, config: Config) -> HttpEndpoint | None:
    """/healthz: the driver's threads run; /readyz: the kubelet registered us and our slices are published.

    /metrics answers but is empty in DRA mode: the device-plugin metrics are not wired to the DRA driver yet.
    """
    address = parse_metrics_address(config.daemon.metrics_address, field="gpuDevicePlugin.metricsAddress")
    if address is None:
        return None

    def liveness() -> EndpointProbeResult:
        ok = driver.publisher.running()
        return EndpointProbeResult(ok, "serving" if ok else f"the slice publisher stopped: {driver.publisher.error}")

    def readiness() -> EndpointProbeResult:
        status = driver.server.registration.status
        if status is None or not status[0]:
            return EndpointProbeResult(False, f"not registered with the kubelet: {status}")
        if driver.publisher.error or not driver.publisher.wait_synced(0.0):
            return EndpointProbeResult(False, f"ResourceSlices not published yet {driver.publisher.error}".strip())
        return EndpointProbeResult(True, f"registered; pool generation {driver.publisher.generation}")

    endpoint = HttpEndpoint(*address, CollectorRegistry(), liveness=liveness, readiness=readiness)
    try:
        endpoint.start()
    except OSError as error:
        log.error("cannot serve the probes on %s: %s", config.daemon.metrics_address, error)
        return None
    return endpoint


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
    endpoint = probes(driver, config)
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
