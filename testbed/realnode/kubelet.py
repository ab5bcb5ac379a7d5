"""The real kubelet: its configuration, start, restart and stop.

Settings from docs/real-node.md: cgroupfs on cgroup v1 (`failCgroupV1: false`), no swap check, serving on
127.0.0.1 with anonymous AlwaysAllow (the API server reads logs over loopback with no kubelet client CA to
set up), no `--node-ip` (the kubelet refuses a loopback one; the node's Hostname address, the machine's
name, resolves to 127.0.0.1), relaxed hard-eviction thresholds, the same feature gates as the control plane.
The root directory is deliberately longer than /var/lib/kubelet: per-instance socket names must fit the
108-byte unix socket limit under any root a user may set. The device-plugin directory is compiled into
the kubelet (/var/lib/kubelet/device-plugins) whatever the root.
"""

from __future__ import annotations

import urllib.request
from dataclasses import dataclass
from pathlib import Path

import yaml

from testbed.realnode.binaries import Binaries
from testbed.realnode.control_plane import FEATURE_GATES
from testbed.realnode.processes import Process, free_port, wait_until

DEVICE_PLUGIN_DIR = Path("/var/lib/kubelet/device-plugins")  # compiled into the kubelet, not moved by --root-dir


def _gates() -> dict[str, bool]:
    return {name: value == "true" for name, value in (pair.split("=") for pair in FEATURE_GATES.split(","))}


@dataclass
class Kubelet:
    folder: Path
    binaries: Binaries
    kubeconfig: Path
    runtime_endpoint: str
    verbosity: int = 2
    process: Process | None = None
    healthz_port: int = 0
    starts: int = 0

    @property
    def root_dir(self) -> Path:
        return self.folder / "root"

    @property
    def plugins_registry(self) -> Path:
        return self.root_dir / "plugins_registry"

    @property
    def pod_resources_socket(self) -> Path:
        return self.root_dir / "pod-resources" / "kubelet.sock"

    def _config(self) -> Path:
        self.healthz_port = free_port()
        config = {
            "apiVersion": "kubelet.config.k8s.io/v1beta1",
            "kind": "KubeletConfiguration",
            "address": "127.0.0.1",
            "port": free_port(),
            "readOnlyPort": 0,
            "healthzBindAddress": "127.0.0.1",
            "healthzPort": self.healthz_port,
            "authentication": {"anonymous": {"enabled": True}, "webhook": {"enabled": False}},
            "authorization": {"mode": "AlwaysAllow"},
            "cgroupDriver": "cgroupfs",
            "failCgroupV1": False,
            "failSwapOn": False,
            "containerRuntimeEndpoint": self.runtime_endpoint,
            "podLogsDir": str(self.folder / "pod-logs"),
            "evictionHard": {"memory.available": "1Mi", "nodefs.available": "1%", "imagefs.available": "1%",
                             "nodefs.inodesFree": "1%"},
            "imageGCHighThresholdPercent": 100,
            "imageGCLowThresholdPercent": 99,
            "serializeImagePulls": False,
            "resolvConf": "",
            "syncFrequency": "10s",
            # Allocatable reaches the API at the node's next status update: 2 s, not 10, keeps the tests short
            "nodeStatusUpdateFrequency": "2s",
            "featureGates": _gates(),
        }  # fmt: skip
        path = self.folder / "kubelet.yaml"
        path.write_text(yaml.safe_dump(config))
        return path

    def start(self) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        DEVICE_PLUGIN_DIR.mkdir(parents=True, exist_ok=True)
        config = self._config()
        self.starts += 1
        self.process = Process(
            "kubelet",
            [
                str(self.binaries.kubelet), f"--config={config}", f"--kubeconfig={self.kubeconfig}",
                f"--root-dir={self.root_dir}", f"--v={self.verbosity}",
            ],
            self.folder / f"kubelet-{self.starts}.log",
        ).start()  # fmt: skip
        wait_until("the kubelet's /healthz", self.healthy, 60, self.process)

    def healthy(self) -> bool:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.healthz_port}/healthz", timeout=2) as answer:
                return bool(answer.status == 200)
        except OSError:
            return False

    def stop(self) -> None:
        if self.process is not None:
            self.process.stop(grace_s=20)

    def restart(self) -> None:
        self.stop()
        self.start()

    def log(self) -> str:
        return "\n".join(path.read_text(errors="replace") for path in sorted(self.folder.glob("kubelet-*.log")))
