"""End-to-end check of the plugin on this node's real GPUs, with the kubelet stand-in; no Kubernetes.

Usage (on a GPU node, from the checkout): .venv/bin/python tools/real_node_check.py [--mig-strategy S]
(`--machine NAME` runs the same steps on a simulated machine; the test suite does, so the tool cannot rot.)

Opens real NVML, starts the same node runtime `gpu-device-plugin run` starts (metrics on 127.0.0.1, a
temporary plugin directory), lets the stand-in register it, prints the device list, admits a 1-GPU pod
(GetPreferredAllocation + Allocate), scrapes /metrics for the GPU gauges, checks every GPU stays
Healthy for a few seconds of health watching, and stops as SIGTERM would. Reads GPU state only; it
never changes MIG or any other setting. Exit 0 when every step passed, 1 otherwise.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from device_plugin.config.loader import load_config  # noqa: E402
from device_plugin.dp.front_end import device_plugin_runtime  # noqa: E402
from device_plugin.nvml.backends import open_backend  # noqa: E402
from device_plugin.standins.kubelet_device_plugin import KubeletStandIn  # noqa: E402

WAIT_S = 30.0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mig-strategy", default="none")
    parser.add_argument("--watch-s", type=float, default=5.0, help="seconds of health watching")
    parser.add_argument("--machine", help="a simulated machine instead of this node's real NVML")
    args = parser.parse_args(argv)
    backend = open_backend(args.machine)
    plugin_dir = Path(tempfile.mkdtemp(prefix="gdp-real-", dir="/tmp"))
    env = {"DEVICE_PLUGIN_DIR": str(plugin_dir), "METRICS_ADDRESS": "127.0.0.1:0", "MIG_STRATEGY": args.mig_strategy}
    kubelet = KubeletStandIn(plugin_dir)
    kubelet.start()
    daemon = device_plugin_runtime(backend, load_config(env=env))
    failures: list[str] = []
    try:
        daemon.start()
        info = backend.system_info()
        print(f"driver {info.driver_version}, CUDA {info.cuda_driver_version}; {len(backend.gpus())} GPUs")
        for resource in daemon.front_end.node.resources:
            name = resource.resource_name
            connection = kubelet.wait_for_connection(name, timeout_s=WAIT_S)
            listed = connection.lists[-1]
            print(f"{name}: registered; {len(listed)} devices:")
            for device in listed:
                print(f"  {device.id}  {device.health}  NUMA {','.join(map(str, device.numa_nodes)) or '-'}")
            admission = kubelet.admit(name, 1)
            print(f"  1-device pod -> {admission.preferred[0]}; envs {admission.envs}")
            if not admission.envs.get("NVIDIA_VISIBLE_DEVICES"):
                failures.append(f"{name}: Allocate gave no NVIDIA_VISIBLE_DEVICES")
        assert daemon.endpoint is not None
        with urllib.request.urlopen(f"http://127.0.0.1:{daemon.endpoint.port}/metrics", timeout=10) as reply:
            gauges = [line for line in reply.read().decode().splitlines() if line.startswith("gpu_device_plugin_gpu_")]
        print("GPU gauges:", *gauges[:12], sep="\n  ")
        if not gauges:
            failures.append("no GPU gauges in /metrics")
        time.sleep(args.watch_s)
        states = daemon.health.states() if daemon.health is not None else {}
        print("health after watching:", {i: (s.health.value, s.reason) for i, s in states.items()})
        failures += [f"GPU {i} {s.health.value}: {s.reason}" for i, s in states.items() if s.health.value != "Healthy"]
    except Exception as error:  # report, then clean up
        failures.append(f"{type(error).__name__}: {error}")
    finally:
        daemon.stop()
        kubelet.stop()
        backend.close()
        shutil.rmtree(plugin_dir, ignore_errors=True)
    print("PASS" if not failures else "FAIL:\n  " + "\n  ".join(failures))
    return 0 if not failures else 1


if __name__ == "__main__":
    sys.exit(main())
