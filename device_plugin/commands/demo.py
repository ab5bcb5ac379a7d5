"""`gpu-device-plugin demo`: the plugin and a kubelet stand-in on a simulated node, explained.

Everything runs in this process over real unix sockets in a temporary directory: no GPU, no
Kubernetes. It walks through registration, the device list, pods of 1, 2 and 4 devices (preferred
allocation, with the predicted collective bandwidth for whole GPUs, then Allocate), a GPU fault and
its recovery, a kubelet restart and re-registration, and shutdown. The plugin is the same node
runtime `run` starts, with the same config (--config / --mig-strategy, commands._compose); only the
directory, the metrics endpoint, the labels file and the health timing are the demo's own.

The walk-through follows nvidia.com/gpu, or the first resource served when there is none (a node
whose GPUs are all MIG devices). On a MIG node that serves nothing under the default migStrategy
none, the demo says so and uses mixed, unless --mig-strategy was given.

With --mode dra (or mode dra from the config or PLUGIN_MODE, as `run` reads it) the walk-through is
the DRA driver's instead (commands/demo_dra.py); machine, config and temporary directory are set up
here for both.
"""

from __future__ import annotations

import argparse
import logging
import shutil
import sys
import tempfile
import time
from collections import Counter
from dataclasses import replace
from pathlib import Path

from device_plugin.allocation.whole_gpu_selection import TopologyPolicy
from device_plugin.commands import demo_dra
from device_plugin.commands._compose import add_config_arguments, load_cli_config
from device_plugin.commands._demo_setup import (
    DEFAULT_MACHINE,
    DEMO_HEALTH,
    FAST_HEALTH,
    LISTED,
    WAIT_S,
    demo_config,
)
from device_plugin.commands._view import VISIBLE, WarningsLogged, allocate_summary
from device_plugin.commands.run import configure_logging
from device_plugin.config.model import Config
from device_plugin.config.not_applied import not_applied_warning
from device_plugin.core.backoff import Backoff
from device_plugin.core.devices import Device
from device_plugin.core.errors import PluginError
from device_plugin.core.mig_strategy import MigStrategy
from device_plugin.core.names import GPU_RESOURCE
from device_plugin.core.short_text import counted
from device_plugin.dp.composition import Node, build_node, envvar_conflicts
from device_plugin.dp.front_end import device_plugin_runtime
from device_plugin.dp_helper.lifecycle import LifecycleTiming
from device_plugin.mig.policy import MigAllocationPolicy
from device_plugin.nvml.fake.catalog import load_machine_description, shipped_machine_names
from device_plugin.nvml.fake.machine import FakeNvml
from device_plugin.nvml.health_types import HealthEvent, HealthEventKind
from device_plugin.standins.kubelet_device_plugin import KubeletStandIn, PluginConnection
from device_plugin.timeslice.policy import ReplicaPolicy

NAME = "demo"
HELP = (
    "show the plugin and a kubelet stand-in at work on a simulated node (no GPU, no Kubernetes "
    "needed)"
)

POD_SIZES = (1, 2, 4)
FAST_TIMING = LifecycleTiming(
    backoff=Backoff(initial_s=0.05, factor=2.0, max_s=0.5),
    stream_lost_grace_s=0.3,
    stop_grace_s=0.2,
    debounce_s=0.05,
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--machine",
        default=DEFAULT_MACHINE,
        metavar="NAME|FILE",
        help=f"simulated machine (default {DEFAULT_MACHINE}; shipped: "
        f"{', '.join(shipped_machine_names())})",
    )
    parser.add_argument(
        "--mode",
        choices=("device-plugin", "dra"),
        help="what to walk through: the device plugin, or with dra the DRA driver with an API "
        "server and a DRA "
        "kubelet stand-in (read as `run` reads it: field gpuDevicePlugin.mode, env PLUGIN_MODE; "
        "default "
        "device-plugin)",
    )
    add_config_arguments(parser)
    parser.add_argument(
        "--verbose", action="store_true", help="also show the plugin's own log lines"
    )
    parser.add_argument(
        "--fast", action="store_true", help="shorter health and retry timings (for tests)"
    )


def run(args: argparse.Namespace) -> int:
    configure_logging("text", "INFO" if args.verbose else "ERROR")
    if args.verbose:  # the decision lines are DEBUG (no INFO line on the kubelet's admission path)
        for policy in (TopologyPolicy, ReplicaPolicy, MigAllocationPolicy):
            logging.getLogger(policy.__module__).setLevel(logging.DEBUG)
    try:
        backend = FakeNvml(load_machine_description(args.machine))
    except PluginError as error:
        print(f"error: {error}", file=sys.stderr)  # the same line as every other subcommand's
        return 2
    plugin_dir = Path(tempfile.mkdtemp(prefix="gdp-demo-", dir="/tmp"))
    try:
        config = demo_config(load_cli_config(args), plugin_dir, args.fast)
        ignored = not_applied_warning(config)
        # `run` logs it as a WARNING, which --verbose shows
        if ignored is not None and not args.verbose:
            print(f"Note: {ignored}")
        if config.daemon.mode == "dra":
            if args.mig_strategy is not None:  # the flag is NVIDIA's device-plugin setting
                print(
                    f"Note: --mig-strategy {args.mig_strategy} has no effect in mode dra: the "
                    "driver publishes whole "
                    "GPUs and MIG devices as devices of their own types, and a claim's DeviceClass "
                    "chooses."
                )
            return demo_dra.walk_through(backend, config, plugin_dir, args.machine, args.fast)
        with WarningsLogged("device_plugin.timeslice") as composed:
            node = build_node(backend, config)
        for line in composed.lines:  # e.g. a sharing entry for a resource this node does not serve
            print(f"Note: {line}")
        if not node.resources and args.mig_strategy is None and node.mig.devices_by_gpu:
            print(
                f"migStrategy {config.flags.mig_strategy} serves nothing on '{args.machine}': "
                "every GPU has MIG "
                "enabled. The demo uses --mig-strategy mixed (`run` needs the same flag or "
                "flags.migStrategy)."
            )
            config = replace(
                config, flags=replace(config.flags, mig_strategy=MigStrategy.MIXED.value)
            )
            node = build_node(backend, config)
        if not node.resources:
            print(
                f"nothing to serve on '{args.machine}' with this config; see `gpu-device-plugin "
                "topology`"
            )
            return 1
        return _walk_through(backend, node, config, args)
    except PluginError as error:  # a broken config or a strategy the node refuses: named field
        print(f"error: {error}", file=sys.stderr)
        return 2
    finally:
        backend.close()
        shutil.rmtree(plugin_dir, ignore_errors=True)


def _walk_through(backend: FakeNvml, node: Node, config: Config, args: argparse.Namespace) -> int:
    resource = (
        GPU_RESOURCE if any(r.resource_name == GPU_RESOURCE for r in node.resources) else None
    )
    resource = resource or node.resources[0].resource_name
    devices = {
        d.id: d for r in node.resources if r.resource_name == resource for d in r.snapshot().devices
    }
    whole = {d.id for d in devices.values()} <= {gpu.uuid for gpu in node.gpus}

    def label(device_id: str) -> str:
        gpu = devices[device_id].gpu_indices[0]
        return f"GPU {gpu}" if whole else f"{device_id} (GPU {gpu})"

    def names(ids: tuple[str, ...]) -> str:
        return ", ".join(label(i) for i in sorted(ids, key=lambda i: (devices[i].gpu_indices, i)))

    plugin_dir = config.daemon.device_plugin_dir
    models = Counter(gpu.name for gpu in node.gpus)  # a mixed node names each model with its count
    kinds = (
        ", ".join(
            name if len(models) == 1 else f"{count}x {name}" for name, count in models.items()
        )
        or "none"
    )
    print(f"Simulated node '{args.machine}': {counted(len(node.gpus), 'GPU')} ({kinds}).")
    served = ", ".join(f"{r.resource_name} ({len(r.snapshot().devices)})" for r in node.resources)
    print(
        f"Resources served (migStrategy {config.flags.mig_strategy}): {served}. Following "
        f"{resource}."
    )
    mig_gpus = sorted(node.mig.devices_by_gpu)
    if mig_gpus and config.flags.mig_strategy == MigStrategy.NONE:
        print(
            f"Note: GPUs {', '.join(map(str, mig_gpus))} have MIG enabled, so migStrategy none "
            "leaves them out of "
            "nvidia.com/gpu (a MIG-enabled GPU cannot be handed out whole); --mig-strategy mixed "
            "serves their MIG "
            "devices as nvidia.com/mig-<profile>."
        )
    for warning in envvar_conflicts(node, config):
        print(f"Note: {warning}")
    print(f"Device-plugin directory: {plugin_dir}")
    daemon = device_plugin_runtime(backend, config, timing=FAST_TIMING if args.fast else None)
    kubelet = KubeletStandIn(plugin_dir, seed=1)
    connection: PluginConnection | None = None
    daemon.start()
    try:
        print(
            "\n1. The plugin starts first. kubelet.sock does not exist yet, so it serves its "
            "socket and waits."
        )
        started = time.monotonic()
        kubelet.start()
        print(
            "   The kubelet stand-in starts and creates kubelet.sock; the plugin notices and "
            "registers."
        )
        connection = kubelet.wait_for_connection(resource, timeout_s=WAIT_S)
        call = next(
            c for c in kubelet.register_calls if c.resource_name == resource and c.refusal is None
        )
        print(
            f"   Registered after {time.monotonic() - started:.2f} s: resource "
            f"{call.resource_name}, "
            f"version {call.version}, endpoint {call.endpoint}."
        )
        print(
            "   Inside Register the kubelet dialled the plugin and asked for its options: "
            "get_preferred_allocation_available="
            f"{connection.plugin_options.get_preferred_allocation_available} "
            "(the same as in the RegisterRequest)."
        )

        print(
            f"\n2. The first ListAndWatch message lists every device of {resource} with its NUMA "
            "node:"
        )
        listed = connection.lists[0]
        for device in listed[:LISTED]:
            numa = ",".join(map(str, device.numa_nodes)) or "unknown"
            print(
                f"   {label(device.id)}  {device.id if whole else ''}  NUMA {numa}  "
                f"{device.health}".replace("    ", "  ")
            )
        if len(listed) > LISTED:
            print(f"   ... and {len(listed) - LISTED} more")

        print(
            "\n3. Pods arrive. For each, the kubelet offers the free devices in random order, asks "
            "which the"
        )
        print(
            "   plugin prefers (GetPreferredAllocation), then calls Allocate with the chosen ones."
        )
        for number, size in enumerate(POD_SIZES, start=1):
            pod = (
                f"pod-{number} ({size} device{'s' if size > 1 else ''})"
                if not whole
                else (f"pod-{number} ({size} GPU{'s' if size > 1 else ''})")
            )
            try:
                admission = kubelet.admit(resource, size)
            except Exception as error:  # not enough devices left, or an RPC error: say so, go on
                print(f"   {pod}: not admitted: {error}")
                continue
            why = ""
            if whole and size > 1 and node.allocator is not None:
                ring = node.allocator.score(
                    [devices[i].gpu_indices[0] for i in admission.preferred]
                ).ring_gbps
                why = f", ring {ring:.0f} GB/s per direction"
            print(
                f"   {pod}: {len(admission.available)} free; plugin prefers "
                f"{names(admission.preferred)}{why}"
            )
            shown = f"{VISIBLE}={admission.envs[VISIBLE]}" if VISIBLE in admission.envs else ""
            print(f"      Allocate -> {shown or allocate_summary(admission.response)}")

        _fault_and_recovery(backend, kubelet, connection, devices, resource, args.fast)

        print(
            "\n5. The kubelet restarts: it deletes every socket in the directory and re-creates "
            "kubelet.sock."
        )
        restarted = time.monotonic()
        deleted = kubelet.restart()
        print(f"   Deleted: {', '.join(deleted) or 'nothing'}.")
        connection = kubelet.wait_for_connection(resource, count=2, timeout_s=WAIT_S)
        print(
            "   The plugin served a fresh socket and registered again after "
            f"{time.monotonic() - restarted:.2f} s; "
            f"the new stream lists {counted(len(connection.lists[0]), 'device')}."
        )

        print(
            "\n6. Shutdown (what SIGTERM does): the plugin sends an empty list, stops and removes "
            "its socket."
        )
    finally:
        daemon.stop()
        if connection is not None:
            final = connection
            kubelet.wait_for(lambda: final.stream_ended, WAIT_S)
        kubelet.stop()
    last = connection.lists[-1]
    print(
        f"   Last list the kubelet saw: {len(last)} devices. Files left: "
        f"{sorted(p.name for p in plugin_dir.iterdir())}"
    )
    print(
        "\nDone. Run `gpu-device-plugin demo --verbose` to see the plugin's own log lines (one per "
        "decision)."
    )
    logging.shutdown()
    return 0


def _fault_and_recovery(
    backend: FakeNvml,
    kubelet: KubeletStandIn,
    connection: PluginConnection,
    devices: dict[str, Device],
    resource: str,
    fast: bool,
) -> None:
    gpu = max(d.gpu_indices[0] for d in devices.values())
    watched = min(i for i, d in devices.items() if d.gpu_indices[0] == gpu)
    print(
        f"\n4. GPU {gpu} reports Xid 79 (fallen off the bus). Every {resource} device of that GPU "
        "goes Unhealthy:"
    )
    started = time.monotonic()
    backend.test_hooks.inject(HealthEvent(gpu, HealthEventKind.XID, xid=79))
    kubelet.wait_for(lambda: _health(connection, watched) == "Unhealthy" or None, WAIT_S)
    print(
        f"   the kubelet's list shows GPU {gpu} Unhealthy after {time.monotonic() - started:.3f} s."
    )
    quiet = (FAST_HEALTH if fast else DEMO_HEALTH).quiet_period_s
    print(
        f"   The GPU comes back; after its probes pass for the quiet period ({quiet:g} s here, 60 "
        "s by default)"
    )
    backend.test_hooks.recover(gpu)
    started = time.monotonic()
    kubelet.wait_for(lambda: _health(connection, watched) == "Healthy" or None, WAIT_S)
    print(
        f"   it is Healthy again after {time.monotonic() - started:.2f} s, without a plugin "
        "restart."
    )


def _health(connection: PluginConnection, device_id: str) -> str | None:
    listed = {d.id: d.health for d in connection.lists[-1]} if connection.lists else {}
    return listed.get(device_id)
