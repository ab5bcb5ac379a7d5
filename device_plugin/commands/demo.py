"""`gpu-device-plugin demo`: the plugin and a kubelet stand-in on a simulated node, explained.

Everything runs in this process over real unix sockets in a temporary directory: no GPU, no
Kubernetes. It walks through registration, the device list, pods of 1, 2 and 4 GPUs (preferred
allocation with the predicted collective bandwidth, then Allocate), a GPU fault and its recovery, a
kubelet restart and re-registration, and shutdown. The plugin is the same Daemon `run` starts.
"""

from __future__ import annotations

import argparse
import logging
import shutil
import tempfile
import time
from pathlib import Path

from device_plugin.allocator import Allocator
from device_plugin.commands.run import configure_logging
from device_plugin.composition import GPU_RESOURCE
from device_plugin.config import Config, DaemonSettings
from device_plugin.daemon import Daemon
from device_plugin.errors import PluginError
from device_plugin.health_config import HealthConfig
from device_plugin.kubelet_standin import KubeletStandIn, PluginConnection
from device_plugin.nvml.catalog import load_machine_description, shipped_machine_names
from device_plugin.nvml.fake import FakeNvml
from device_plugin.nvml.health_types import HealthEvent, HealthEventKind
from device_plugin.topology_build import build_topology

NAME = "demo"
HELP = "Show the plugin and a kubelet stand-in at work on a simulated node (no GPU, no Kubernetes needed)."

DEFAULT_MACHINE = "dgx1-v100"
POD_SIZES = (1, 2, 4)
WAIT_S = 15.0
# The demo's health timing: recovery after 1 s of passing probes (the daemon's default is 60 s).
DEMO_HEALTH = HealthConfig(quiet_period_s=1.0, probe_interval_s=0.1, event_wait_s=0.05)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--machine",
        default=DEFAULT_MACHINE,
        metavar="NAME|FILE",
        help=f"simulated machine (default {DEFAULT_MACHINE}; shipped: {', '.join(shipped_machine_names())})",
    )
    parser.add_argument("--verbose", action="store_true", help="also show the plugin's own log lines")


def run(args: argparse.Namespace) -> int:
    configure_logging("text", "INFO" if args.verbose else "ERROR")
    try:
        backend = FakeNvml(load_machine_description(args.machine))
    except PluginError as error:
        print(f"cannot load machine {args.machine!r}: {error}")
        return 2
    plugin_dir = Path(tempfile.mkdtemp(prefix="gdp-demo-", dir="/tmp"))
    try:
        return _walk_through(backend, plugin_dir, args.machine)
    finally:
        backend.close()
        shutil.rmtree(plugin_dir, ignore_errors=True)


def _walk_through(backend: FakeNvml, plugin_dir: Path, machine: str) -> int:
    gpus = backend.gpus()
    index_of = {gpu.uuid: gpu.index for gpu in gpus}

    def names(ids: tuple[str, ...] | list[str]) -> str:
        return ", ".join(f"GPU {index_of[i]}" for i in sorted(ids, key=lambda i: index_of[i]))

    print(f"Simulated node '{machine}': {len(gpus)} GPUs ({gpus[0].name if gpus else 'none'}).")
    print(f"Device-plugin directory: {plugin_dir}")
    config = Config(daemon=DaemonSettings(device_plugin_dir=plugin_dir, metrics_address="", health=DEMO_HEALTH))
    daemon = Daemon(backend, config)
    allocator = Allocator(build_topology(backend))
    kubelet = KubeletStandIn(plugin_dir, seed=1)
    connection: PluginConnection | None = None
    daemon.start()
    try:
        print("\n1. The plugin starts first. kubelet.sock does not exist yet, so it serves its socket and waits.")
        started = time.monotonic()
        kubelet.start()
        print("   The kubelet stand-in starts and creates kubelet.sock; the plugin notices and registers.")
        connection = kubelet.wait_for_connection(GPU_RESOURCE, timeout_s=WAIT_S)
        (call,) = kubelet.register_calls
        print(
            f"   Registered after {time.monotonic() - started:.2f} s: resource {call.resource_name}, "
            f"version {call.version}, endpoint {call.endpoint}."
        )
        print(
            "   Inside Register the kubelet dialled the plugin and asked for its options: "
            f"get_preferred_allocation_available={connection.plugin_options.get_preferred_allocation_available} "
            "(the same as in the RegisterRequest)."
        )

        print("\n2. The first ListAndWatch message lists every GPU with its NUMA node:")
        for device in connection.lists[0]:
            numa = ",".join(map(str, device.numa_nodes)) or "unknown"
            print(f"   GPU {index_of[device.id]}  {device.id}  NUMA {numa}  {device.health}")

        print("\n3. Pods arrive. For each, the kubelet offers the free GPUs in random order, asks which the")
        print("   plugin prefers (GetPreferredAllocation), then calls Allocate with the chosen ones.")
        for number, size in enumerate(POD_SIZES, start=1):
            label = f"pod-{number} ({size} GPU{'s' if size > 1 else ''})"
            try:
                admission = kubelet.admit(GPU_RESOURCE, size)
            except Exception as error:  # not enough GPUs left, or an RPC error: say so, go on
                print(f"   {label}: not admitted: {error}")
                continue
            chosen = [index_of[i] for i in admission.preferred]
            ring = allocator.score(chosen).ring_gbps
            why = f", ring {ring:.0f} GB/s per direction" if size > 1 else ""
            print(f"   {label}: {len(admission.available)} free; plugin prefers {names(admission.preferred)}{why}")
            print(f"      Allocate -> NVIDIA_VISIBLE_DEVICES={admission.envs.get('NVIDIA_VISIBLE_DEVICES', '')}")

        _fault_and_recovery(backend, kubelet, connection, index_of)

        print("\n5. The kubelet restarts: it deletes every socket in the directory and re-creates kubelet.sock.")
        restarted = time.monotonic()
        deleted = kubelet.restart()
        print(f"   Deleted: {', '.join(deleted) or 'nothing'}.")
        connection = kubelet.wait_for_connection(GPU_RESOURCE, count=2, timeout_s=WAIT_S)
        print(
            f"   The plugin served a fresh socket and registered again after {time.monotonic() - restarted:.2f} s; "
            f"the new stream lists {len(connection.lists[0])} GPUs."
        )

        print("\n6. Shutdown (what SIGTERM does): the plugin sends an empty list, stops and removes its socket.")
    finally:
        daemon.stop()
        if connection is not None:
            final = connection
            kubelet.wait_for(lambda: final.stream_ended, WAIT_S)
        kubelet.stop()
    last = connection.lists[-1]
    print(
        f"   Last list the kubelet saw: {len(last)} devices. Files left: {sorted(p.name for p in plugin_dir.iterdir())}"
    )
    print("\nDone. Run `gpu-device-plugin demo --verbose` to see the plugin's own log lines (one per decision).")
    logging.shutdown()
    return 0


def _fault_and_recovery(
    backend: FakeNvml, kubelet: KubeletStandIn, connection: PluginConnection, index_of: dict[str, int]
) -> None:
    gpu = backend.gpus()[-1]
    print(f"\n4. GPU {gpu.index} reports Xid 79 (fallen off the bus). Every device of that GPU goes Unhealthy:")
    started = time.monotonic()
    backend.faults.inject(HealthEvent(gpu.index, HealthEventKind.XID, xid=79))
    kubelet.wait_for(lambda: _health(connection, gpu.uuid) == "Unhealthy" or None, WAIT_S)
    print(f"   the kubelet's list shows GPU {gpu.index} Unhealthy after {time.monotonic() - started:.3f} s.")
    print("   The GPU comes back; after its probes pass for the quiet period (1 s here, 60 s by default)")
    backend.faults.recover(gpu.index)
    started = time.monotonic()
    kubelet.wait_for(lambda: _health(connection, gpu.uuid) == "Healthy" or None, WAIT_S)
    print(f"   it is Healthy again after {time.monotonic() - started:.2f} s, without a plugin restart.")


def _health(connection: PluginConnection, device_id: str) -> str | None:
    listed = {d.id: d.health for d in connection.lists[-1]} if connection.lists else {}
    return listed.get(device_id)
