"""`gpu-device-plugin demo --mode dra`: the DRA driver, an API server stand-in and a DRA kubelet
stand-in, explained.

Everything runs in this process: the API stand-in over HTTP on 127.0.0.1, the kubelet stand-in over
the driver's real unix sockets in a temporary directory; no GPU, no Kubernetes. It walks through
registration, the published ResourceSlices, a claim prepared (CDI device IDs), a GPU fault (device
taints in the slices), its recovery, and shutdown (claim unprepared, slices deleted, sockets
removed). The driver is the node runtime `run --mode dra` starts, with the DRA front-end and the
same config (--config, commands._compose); only the directory, the API server, the node name and the
health timing are the demo's own.

The API stand-in here checks no schemas (the package has no schema library; the tests check every
write against Kubernetes' schemas with kubernetes-validate), but it keeps and stamps taints as the
API server does.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any, TypeVar

from device_plugin.commands._demo_setup import DEMO_HEALTH, FAST_HEALTH, LISTED, WAIT_S
from device_plugin.config.model import Config
from device_plugin.core.short_text import counted
from device_plugin.dra.front_end import DraFrontEnd
from device_plugin.dra_helper.api.kube import api_client
from device_plugin.node.runtime import NodeRuntime
from device_plugin.nvml.fake.machine import FakeNvml
from device_plugin.nvml.health_types import HealthEvent, HealthEventKind
from device_plugin.standins.api_objects import allocated_claim
from device_plugin.standins.api_server import ApiStandin
from device_plugin.standins.kubelet_dra import DraKubeletStandin, HealthWatch

NODE = "demo-node"
T = TypeVar("T")
UNHEALTHY, HEALTHY = 2, 1  # DRAResourceHealth HealthStatus (the same numbers in v1alpha1 and v1)
CLAIM = ("demo", "gpu-claim", "6f1c2a3e-0000-4000-8000-000000000001")  # namespace, name, uid


def walk_through(backend: FakeNvml, config: Config, root: Path, machine: str, fast: bool) -> int:
    """The six steps on `backend`, with the driver's files under `root` (the demo's temporary
    directory)."""
    config = replace(
        config, daemon=replace(config.daemon, mode="dra", device_plugin_dir=root / "device-plugins")
    )
    api = ApiStandin().up()
    api.add_node(NODE)
    front_end = DraFrontEnd.for_config(
        config, api_client(api.host), node_name=NODE, backoff_max_s=0.2
    )
    runtime = NodeRuntime(backend, config, front_end)
    kubelet = DraKubeletStandin(root / "plugins_registry")
    driver = front_end.driver_name
    gpus = backend.gpus()
    print(
        f"Simulated node '{machine}': {counted(len(gpus), 'GPU')}; DRA driver {driver}, node "
        f"{NODE}."
    )
    print(f"API server stand-in: {api.host}; kubelet directory: {root}")
    stopped = False
    health: HealthWatch | None = None
    try:
        print(
            "\n1. The driver starts: it serves its registration socket and its DRA socket, and "
            "publishes its"
        )
        print(
            "   ResourceSlices. The kubelet stand-in finds the registration socket and calls "
            "GetInfo."
        )
        started = time.monotonic()
        runtime.start()
        plugin = kubelet.wait_for_plugin(timeout_s=WAIT_S)
        endpoint = Path(plugin.endpoint).relative_to(root)
        print(
            f"   Registered after {time.monotonic() - started:.2f} s: {plugin.name}, service "
            f"{plugin.version},"
        )
        print(
            f"   health service {plugin.health_version}, endpoint {endpoint} in the kubelet "
            "directory."
        )
        # the stream the kubelet keeps open; pod status shows what it says
        health = kubelet.watch_health(plugin)

        if not front_end.publisher.wait_synced(WAIT_S):
            print("   the slices were not published in time")
            return 1
        pool = api.pool(driver, NODE)
        devices = [d for s in pool for d in s["spec"]["devices"]]
        generation = pool[0]["spec"]["pool"]["generation"] if pool else 0
        held = f"{counted(len(pool), 'ResourceSlice')}, {counted(len(devices), 'device')}"
        print(f"\n2. The pool {NODE} (generation {generation}): {held}:")
        for device in devices[:LISTED]:
            attributes = device.get("attributes") or device.get("basic", {}).get("attributes", {})
            kind = next(iter(attributes.get("type", {}).values()), "?")
            uuid = next(iter(attributes.get("uuid", {}).values()), "?")
            print(f"   {device['name']:<22} {kind:<4} {uuid}")
        if len(devices) > LISTED:
            print(f"   ... and {len(devices) - LISTED} more")
        if not devices:
            print("   nothing to allocate on this machine")
            return 1

        first = devices[0]["name"]
        _allocate(api, driver, first)
        print(
            f"\n3. A pod's claim {CLAIM[0]}/{CLAIM[1]} is allocated {first} (the scheduler's part, "
            "written into the"
        )
        print(
            "   stand-in); the kubelet calls NodePrepareResources and hands the CDI device IDs to "
            "the runtime."
        )
        namespace, name, uid = CLAIM
        prepared = kubelet.prepare(plugin, [(namespace, uid, name)])[uid]
        for device in prepared.devices:  # type: ignore[attr-defined]
            print(f"   {device.device_name}: {', '.join(device.cdi_device_ids)}")

        claimed = {d.device_name for d in prepared.devices}  # type: ignore[attr-defined]
        sick = _faulty_gpu(front_end, claimed=claimed)
        tainted_names = {d.name for d in front_end.devices() if d.gpu_index == sick}
        its = "device gets" if len(tainted_names) == 1 else f"{len(tainted_names)} devices get"
        print(f"\n4. GPU {sick} reports Xid 79 (fallen off the bus). Its {its} a taint:")
        started = time.monotonic()
        backend.test_hooks.inject(HealthEvent(sick, HealthEventKind.XID, xid=79))
        taints = _wait(
            lambda: _taints(api, driver) if set(_taints(api, driver)) == tainted_names else None
        )
        elapsed = time.monotonic() - started
        shown = sorted(taints)[0]
        taint = taints[shown][0]
        value = f"={taint['value']}" if taint.get("value") else ""
        print(
            f"   {shown}: {taint['key']}{value}:{taint['effect']}, in the slices after "
            f"{elapsed:.3f} s;"
        )
        print(
            "   the scheduler allocates no device with a NoSchedule taint to a claim that does not "
            "tolerate it."
        )
        reported = health.until(lambda d: d.get(shown, (0, ""))[0] == UNHEALTHY, WAIT_S)
        print(f"   The kubelet's health stream says {shown} is unhealthy: {reported[shown][1]}")

        quiet = (FAST_HEALTH if fast else DEMO_HEALTH).quiet_period_s
        print(
            f"\n5. The GPU comes back; after its probes pass for the quiet period ({quiet:g} s "
            "here, 60 s by"
        )
        started = time.monotonic()
        backend.test_hooks.recover(sick)
        _wait(lambda: True if not _taints(api, driver) else None)
        new_generation = api.pool(driver, NODE)[0]["spec"]["pool"]["generation"]
        elapsed = time.monotonic() - started
        print(
            f"   default) the taint is gone: after {elapsed:.2f} s, pool generation "
            f"{new_generation}, no restart."
        )
        health.until(lambda d: d.get(shown, (0, ""))[0] == HEALTHY, WAIT_S)
        print(f"   The health stream says {shown} is healthy again.")

        print(
            "\n6. The pod ends: NodeUnprepareResources. Then shutdown (what SIGTERM does): the "
            "driver deletes"
        )
        print("   its ResourceSlices and removes its sockets.")
        errors = kubelet.unprepare(plugin, [(namespace, uid, name)])
        print(f"   Unprepared {name}: {errors[uid] or 'ok'}.")
        health.close()
        health = None
        clean = runtime.stop()
        stopped = True
        sockets = sorted(p.name for p in root.rglob("*.sock"))
        left = len(api.pool(driver, NODE))
        print(
            f"   Stopped ({'clean' if clean else 'cut short'}); slices left: {left}; sockets left: "
            f"{sockets}"
        )
    finally:
        if health is not None:
            health.close()
        if not stopped:
            runtime.stop()
        api.down()
    print(
        "\nDone. Run `gpu-device-plugin demo --mode dra --verbose` to see the driver's own log "
        "lines."
    )
    return 0


def _faulty_gpu(front_end: DraFrontEnd, claimed: set[str]) -> int:
    """The GPU the demo faults: not the claimed one where there is another, the one with the most
    devices (a MIG GPU shows every MIG device tainted), the highest index among equals."""
    per_gpu: dict[int, int] = {}
    for device in front_end.devices():
        per_gpu[device.gpu_index] = per_gpu.get(device.gpu_index, 0) + 1
    busy = {d.gpu_index for d in front_end.devices() if d.name in claimed}
    candidates = [g for g in per_gpu if g not in busy] or list(per_gpu)
    return max(candidates, key=lambda g: (per_gpu[g], g))


def _allocate(api: ApiStandin, driver: str, device: str) -> None:
    """The claim as the scheduler leaves it: one request, one result on our pool."""
    namespace, name, uid = CLAIM
    result = {"request": "gpu", "driver": driver, "pool": NODE, "device": device}
    api.claims[(namespace, name)] = allocated_claim(namespace, name, uid, [result])


def _taints(api: ApiStandin, driver: str) -> dict[str, list[dict[str, Any]]]:
    """Device name -> its taints, over the pool's newest generation."""
    pool = api.pool(driver, NODE)
    newest = max((s["spec"]["pool"]["generation"] for s in pool), default=0)
    found = {}
    for piece in pool:
        if piece["spec"]["pool"]["generation"] != newest:
            continue
        for device in piece["spec"]["devices"]:
            body = device.get("basic", device)
            if body.get("taints"):
                found[device["name"]] = body["taints"]
    return found


def _wait(check: Callable[[], T | None]) -> T:
    deadline = time.monotonic() + WAIT_S
    while True:
        value = check()
        if value is not None:
            return value
        if time.monotonic() > deadline:
            raise TimeoutError(f"not seen within {WAIT_S:g} s")
        time.sleep(0.01)
