"""A real control plane and one real node, started once and torn down completely.

`RealCluster.start()` brings up etcd, the three control-plane servers, containerd and the kubelet, then
waits until the node is Ready, schedulable (the not-ready taint lifted by the node lifecycle controller)
and the default service account exists. `stop()` deletes every pod, stops the kubelet, kills what is
left in the kubelet's cgroups, stops containerd and its shims and the control plane (every process by
its pid), unmounts what the kubelet and containerd mounted under the run's folder, and removes it.
"""

from __future__ import annotations

import contextlib
import shutil
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from testbed.realnode import binaries as binaries_module
from testbed.realnode.container_runtime import ContainerRuntime
from testbed.realnode.control_plane import ControlPlane
from testbed.realnode.kubectl import Kubectl
from testbed.realnode.kubelet import Kubelet
from testbed.realnode.processes import kill_pids

CGROUP_ROOT = Path("/sys/fs/cgroup")


@dataclass
class RealCluster:
    folder: Path
    binaries: binaries_module.Binaries
    node_name: str = field(default_factory=lambda: socket.gethostname().lower())
    control_plane: ControlPlane | None = None
    runtime: ContainerRuntime | None = None
    kubelet: Kubelet | None = None
    started_s: dict[str, float] = field(default_factory=dict)

    @classmethod
    def create(cls, binaries: binaries_module.Binaries | None = None) -> RealCluster:
        # A short folder in /tmp: containerd's socket must fit 108 bytes; the kubelet root below it is still
        # longer than /var/lib/kubelet, on purpose (kubelet.py).
        folder = Path(tempfile.mkdtemp(prefix="gdp-rn-", dir="/tmp"))
        return cls(folder, binaries or binaries_module.find())

    @property
    def kubectl(self) -> Kubectl:
        assert self.control_plane is not None
        return Kubectl(self.binaries.kubectl, self.control_plane.admin_kubeconfig)

    def start(self) -> RealCluster:
        began = time.monotonic()
        self.control_plane = ControlPlane(self.folder / "control-plane", self.binaries, self.node_name)
        self.control_plane.start()
        self.started_s["control plane"] = time.monotonic() - began
        self.runtime = ContainerRuntime(self.folder / "containerd", self.binaries)
        self.runtime.start()
        self.started_s["containerd and images"] = time.monotonic() - began
        self.kubelet = Kubelet(
            self.folder / "kubelet", self.binaries, self.control_plane.folder / "pki" / "kubelet.kubeconfig",
            self.runtime.endpoint,
        )  # fmt: skip
        self.kubelet.start()
        self.wait_node_ready()
        self.kubectl.wait_for(
            "the default service account", lambda: self._exists("serviceaccount", "default", "-n", "default"), 60
        )
        self.started_s["node ready"] = time.monotonic() - began
        return self

    def _exists(self, *argv: str) -> bool:
        try:
            self.kubectl.get(*argv)
        except Exception:
            return False
        return True

    def node(self) -> dict[str, Any]:
        node: dict[str, Any] = self.kubectl.get("node", self.node_name)
        return node

    def wait_node_ready(self, timeout_s: float = 90) -> None:
        def ready() -> bool:
            try:
                node = self.node()
            except Exception:
                return False
            conditions = {c["type"]: c["status"] for c in node.get("status", {}).get("conditions", [])}
            taints = [t["key"] for t in node.get("spec", {}).get("taints", []) or []]
            return conditions.get("Ready") == "True" and "node.kubernetes.io/not-ready" not in taints

        self.kubectl.wait_for(f"node {self.node_name} Ready and untainted", ready, timeout_s)

    def stop(self) -> None:
        """Everything down, every process by pid, nothing left mounted or bound; safe to call twice."""
        if self.kubelet is not None and self.kubelet.process is not None and self.kubelet.process.running():
            with contextlib.suppress(Exception):
                self.kubectl.run("delete", "pods", "--all", "--all-namespaces", "--grace-period=0", "--force",
                                 "--wait=false", timeout_s=30)  # fmt: skip
                self.kubectl.wait_for("pods gone", lambda: not self.kubectl.items("pods", "-A"), 30)
        if self.kubelet is not None:
            self.kubelet.stop()
        kill_pids(_pids_in_cgroup("kubepods"))
        if self.runtime is not None:
            self.runtime.stop()
        if self.control_plane is not None:
            self.control_plane.stop()
        _unmount_under(self.folder)
        shutil.rmtree(self.folder, ignore_errors=True)


def _pids_in_cgroup(name: str) -> list[int]:
    pids: set[int] = set()
    for procs in CGROUP_ROOT.glob(f"*/{name}/**/cgroup.procs"):
        with contextlib.suppress(OSError, ValueError):
            pids.update(int(line) for line in procs.read_text().split())
    return sorted(pids)


def _unmount_under(folder: Path) -> None:
    prefix = str(folder)
    with open("/proc/self/mounts") as mounts:
        points = [line.split()[1] for line in mounts if line.split()[1].startswith(prefix)]
    for point in sorted(points, key=len, reverse=True):
        subprocess.run(["umount", "-l", point], capture_output=True, check=False)
