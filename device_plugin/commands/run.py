"""`gpu-device-plugin run`: the daemon, in either mode (device plugin, or DRA driver with `--mode
dra`).

One start-up path for both: loads the config (CLI > env > file), opens the NVML backend (real, or a
named/described machine with --machine), picks the front-end by `gpuDevicePlugin.mode` (the device
plugin's PluginManagers, dp/front_end.py; the DRA driver, dra/front_end.py), builds the node
runtime (node/runtime.py) and serves until SIGTERM/SIGINT. When NVML cannot start it exits non-zero,
or with failOnInitError=false logs why and waits without serving. A stop that comes during start-up
ends it at once (exit 0: nothing was served); one while serving gets the graceful budget, and the
exit code says whether the stop finished (0) or was cut short (1). In mode dra the node name comes
from NODE_NAME (the downward API's spec.nodeName), the API server from $KUBECONFIG when set, else
the pod's service account.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path

from device_plugin.commands._machine import machine_help
from device_plugin.config.arguments import add_config_file_argument, add_setting_arguments
from device_plugin.config.loader import ConfigSources, sources_from_args
from device_plugin.config.model import Config
from device_plugin.config.not_applied import warn_not_applied
from device_plugin.config.watch import ConfigFileWatch
from device_plugin.core.errors import ConfigError, NvmlUnavailableError, PluginError
from device_plugin.core.version import package_version
from device_plugin.dp.front_end import DevicePluginFrontEnd
from device_plugin.health.fake_events import FakeEventsTail
from device_plugin.node.front_end_protocol import FrontEnd
from device_plugin.node.runtime import NodeRuntime
from device_plugin.nvml.backends import open_backend
from device_plugin.nvml.fake.machine import FakeNvml
from device_plugin.nvml.protocol import NvmlBackend
from device_plugin.observability.http_endpoint import EndpointBindError
from device_plugin.process.gc_pauses import freeze_start_up_objects
from device_plugin.process.log_writer import flush as flush_log_writer
from device_plugin.process.log_writer import in_background
from device_plugin.process.signals import ProcessSignals
from device_plugin.process.signals import install as install_signal_handlers

NAME = "run"
HELP = "run the device plugin daemon (real NVML, or a simulated machine with --machine)"

log = logging.getLogger(__name__)

# the runtime's share; the watchers' joins after it keep SIGTERM to exit under 5 s
STOP_TIMEOUT_S = 3.5
STOPPING = {  # what a stop does first, per mode, for the log line
    "device-plugin": "sending empty device lists and stopping",
    "dra": "deregistering and deleting our ResourceSlices",
}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--machine", metavar="NAME|FILE", help="simulate " + machine_help("real NVML")
    )
    add_config_file_argument(parser)
    add_setting_arguments(parser)  # one flag per declared setting (config/arguments.py)
    parser.add_argument(
        "--fake-events",
        metavar="FILE",
        help='with --machine: inject faults from JSON lines appended to FILE, e.g. {"gpu": 3, '
        '"xid": 79}',
    )
    parser.add_argument(
        "--log-level",
        default="INFO",
        type=str.upper,
        choices=("DEBUG", "INFO", "WARNING", "ERROR"),
        metavar="LEVEL",
        help="DEBUG, INFO, WARNING or ERROR (default INFO)",
    )


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        entry = {
            "ts": round(record.created, 3),
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        if record.exc_info:
            entry["exc"] = self.formatException(record.exc_info)
        return json.dumps(entry, sort_keys=True)


def configure_logging(log_format: str, level: str = "INFO") -> None:
    handler = logging.StreamHandler(sys.stderr)
    if log_format == "json":
        handler.setFormatter(JsonFormatter())
    else:
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger()
    # off the RPC path: see device_plugin.process.log_writer
    root.handlers[:] = [in_background(handler)]
    root.setLevel(level.upper())


def run(args: argparse.Namespace) -> int:
    try:
        return _run(args)
    finally:
        # every line, the exit reason above all, is written before the exit code returns
        flush_log_writer()


class _Exit(Exception):
    """A start-up step ended the run: it has logged why and undone what it opened; `code` is the
    exit code."""

    def __init__(self, code: int) -> None:
        super().__init__(code)
        self.code = code


def _run(args: argparse.Namespace) -> int:
    # already installed by the CLI before its imports; idempotent
    signals = install_signal_handlers()
    try:
        sources, config = _load_config(args)
        # mode dra: NODE_NAME and the API client, checked first
        make_front_end = _front_end_maker(args, config)
        backend = _open_backend(args, config, signals)
        runtime = _build_runtime(backend, config, sources, make_front_end)
    except _Exit as exit_:
        return exit_.code
    tail = _start_fake_events(args, backend)
    watch = (
        ConfigFileWatch(sources.config_file, runtime.request_rescan)
        if sources.config_file is not None
        else None
    )
    if not signals.serving():  # a stop arrived during start-up: nothing served yet, nothing to undo
        log.info("received %s during start-up; exiting", signals.received)
        _close(tail, backend)
        return 0
    refused = _start_runtime(runtime)
    if refused:
        _close(tail, backend)
        return refused
    if watch is not None:
        watch.start()
    signals.on_hangup = runtime.request_rescan
    frozen = freeze_start_up_objects()  # full collections stay short on the health and RPC paths
    # Started, not yet serving: each socket logs when it is served and registered (another process
    # may hold it).
    log.info(
        "%s started; each of its sockets says below when it is served and registered",
        runtime.front_end.name,
    )
    log.debug("start-up objects frozen out of garbage collection: %d", frozen)
    signal_name = signals.wait()
    started = time.monotonic()
    log.info("received %s; %s", signal_name, STOPPING.get(config.daemon.mode, "stopping"))
    # first: the kubelet hears of it as early as possible
    clean = runtime.stop(timeout_s=STOP_TIMEOUT_S)
    if watch is not None:
        watch.stop()
    _close(tail, backend)
    if not clean:
        log.error("the stop was cut short after %.2f s; exiting 1", time.monotonic() - started)
        return 1
    log.info("stopped in %.2f s", time.monotonic() - started)
    return 0


def _load_config(args: argparse.Namespace) -> tuple[ConfigSources, Config]:
    """The effective config, logged once with the version and mode; sets up logging. A config error
    exits 2."""
    try:
        sources = sources_from_args(args, os.environ)  # read again, the same way, at every reload
        config = sources.load()
    except ConfigError as error:
        print(f"gpu-device-plugin: config error: {error}", file=sys.stderr)
        raise _Exit(2) from error
    configure_logging(config.daemon.log_format, args.log_level)
    # One line that a bug report always has: which version, which mode, with what settings.
    log.info(
        "gpu-device-plugin %s, mode %s; effective config (%s): %s",
        package_version(),
        config.daemon.mode,
        "; ".join(config.sources) or "defaults",
        config.describe(),
    )
    # NVIDIA's fields taken with no effect: one line, at start and on reload
    warn_not_applied(config)
    if args.fake_events and not args.machine:
        log.error(
            "--fake-events needs --machine: faults can only be injected into a simulated machine"
        )
        raise _Exit(2)
    return sources, config


def _open_backend(args: argparse.Namespace, config: Config, signals: ProcessSignals) -> NvmlBackend:
    """Real NVML or the named machine. NVML missing exits 1, or with failOnInitError=false waits for
    a stop."""
    try:
        return open_backend(args.machine)
    except NvmlUnavailableError as error:
        if config.flags.fail_on_init_error:
            log.error(
                "NVML is unavailable: %s. Is the NVIDIA driver installed and this a GPU node?",
                error,
            )
            log.error(
                "exiting; set failOnInitError=false (FAIL_ON_INIT_ERROR=false) to wait instead"
            )
            raise _Exit(1) from error
        log.error(
            "NVML is unavailable: %s. failOnInitError=false: waiting without serving until SIGTERM",
            error,
        )
        log.info("received %s; exiting", signals.wait())
        raise _Exit(0) from error
    except ConfigError as error:  # a bad machine description
        log.error("cannot load machine %s: %s", args.machine, error)
        raise _Exit(2) from error


def _build_runtime(
    backend: NvmlBackend,
    config: Config,
    sources: ConfigSources,
    make_front_end: Callable[[], FrontEnd],
) -> NodeRuntime:
    """The node runtime over the open backend; on failure the backend is closed (config 2,
    enumeration 1)."""
    try:
        return NodeRuntime(
            backend,
            config,
            make_front_end(),
            load_config=sources.load,
            config_file=sources.config_file,
        )
    except ConfigError as error:
        log.error("config error: %s", error)
        backend.close()
        raise _Exit(2) from error
    except PluginError as error:
        log.error("cannot enumerate GPUs: %s", error)
        backend.close()
        raise _Exit(1) from error


def _start_fake_events(args: argparse.Namespace, backend: NvmlBackend) -> FakeEventsTail | None:
    """With --fake-events on a simulated machine: the tail that injects the file's faults,
    started."""
    if not (args.fake_events and isinstance(backend, FakeNvml)):
        return None
    tail = FakeEventsTail(Path(args.fake_events), backend.test_hooks.inject)
    tail.start()
    return tail


def _start_runtime(runtime: NodeRuntime) -> int:
    """Start serving; the exit code (logged) when it could not, after the runtime stopped what it
    had started: 2 for a config error (a DRA checkpoint folder that cannot be used), else 1. 0:
    serving."""
    try:
        runtime.start()
    except Exception as error:  # the runtime stopped what it had started
        if isinstance(error, ConfigError):
            log.error("config error: %s", error)
            return 2
        if isinstance(error, EndpointBindError):
            log.error(
                "%s. Free the port, or set gpuDevicePlugin.metricsAddress (METRICS_ADDRESS) to "
                "another "
                'address, or to "" to turn the endpoint off; exiting',
                error,
            )
        else:
            log.error("cannot start serving: %s", error)
        return 1
    return 0


def _close(tail: FakeEventsTail | None, backend: NvmlBackend) -> None:
    """Last in every exit after the backend opened: the fake-events tail, then the backend."""
    if tail is not None:
        tail.stop()
    backend.close()


def _front_end_maker(args: argparse.Namespace, config: Config) -> Callable[[], FrontEnd]:
    """The mode's front-end, made once the backend is open; exit 2 when mode dra lacks its node or
    API."""
    if config.daemon.mode != "dra":  # one node runs one mode
        return DevicePluginFrontEnd
    # deferred: the kubernetes client is for mode dra
    from device_plugin.dra.front_end_start import front_end_maker

    try:
        return front_end_maker(config, os.environ)
    except ConfigError as error:
        log.error("%s", error)
        raise _Exit(2) from error
