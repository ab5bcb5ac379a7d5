"""containerd for the real node: its root, state, socket and runc root all inside the run's folder.

Settings that bite on these machines (docs/real-node.md): `restrict_oom_score_adj` (root here lacks
CAP_SYS_RESOURCE; without it every sandbox fails), cgroupfs (cgroup v1, no systemd), a CNI config holding
an isolated bridge (no address on the host side, no gateway, no NAT: pods reach each other and nothing else;
containerd's CRI wants an address on eth0, which the loopback plugin alone never gives), and the sandbox
image built by images.py. containerd 1.6 has no CDI: CDI device names the kubelet passes are dropped.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from testbed.realnode import images
from testbed.realnode.binaries import Binaries
from testbed.realnode.processes import Process, kill_pids, pids_matching, wait_until

POD_SUBNET = "10.233.0.0/24"  # on a bridge with no host address: routed nowhere
NAMESPACE = "k8s.io"  # where the CRI plugin keeps the kubelet's images and containers

CONFIG = """\
version = 2
root = "{folder}/root"
state = "{folder}/state"
disabled_plugins = ["io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs",
                    "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper"]
[grpc]
  address = "{socket}"
[plugins."io.containerd.internal.v1.opt"]
  path = "{folder}/opt"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "{pause}"
  restrict_oom_score_adj = true
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "{cni_bin}"
    conf_dir = "{folder}/cni"
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
        BinaryName = "{runc}"
        Root = "{folder}/runc"
"""


@dataclass
class ContainerRuntime:
    folder: Path
    binaries: Binaries
    process: Process | None = None

    @property
    def socket(self) -> Path:
        return self.folder / "containerd.sock"

    @property
    def bridge(self) -> str:
        return "gdp" + self.folder.parent.name.rsplit("-", 1)[-1][:10]  # one per run; at most 15 characters

    @property
    def endpoint(self) -> str:
        return f"unix://{self.socket}"

    def start(self) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        cni = self.folder / "cni"
        cni.mkdir(exist_ok=True)
        bridge = {
            "type": "bridge", "bridge": self.bridge, "isGateway": False, "ipMasq": False, "hairpinMode": False,
            "ipam": {"type": "host-local", "ranges": [[{"subnet": POD_SUBNET}]], "dataDir": str(self.folder / "ipam")},
        }  # fmt: skip
        (cni / "10-isolated.conflist").write_text(
            json.dumps({"cniVersion": "0.4.0", "name": "real-node-isolated", "plugins": [bridge]})
        )
        config = self.folder / "config.toml"
        config.write_text(
            CONFIG.format(
                folder=self.folder, socket=self.socket, pause=images.PAUSE_IMAGE,
                cni_bin=self.binaries.cni_folder, runc=self.binaries.runc,
            )
        )  # fmt: skip
        self.process = Process(
            "containerd", [str(self.binaries.containerd), "--config", str(config)], self.folder / "containerd.log"
        ).start()
        wait_until("containerd's socket", self._answers, 30, self.process)
        built = self.folder / "images"
        built.mkdir(exist_ok=True)
        for archive in (
            images.build_pause(self.binaries.gcc, built),
            images.build_busybox(self.binaries.busybox, built),
        ):
            self.ctr("images", "import", str(archive))

    def _answers(self) -> bool:
        if not self.socket.exists():
            return False
        done = subprocess.run(
            [str(self.binaries.ctr), "--address", str(self.socket), "version"], capture_output=True, timeout=10
        )
        return done.returncode == 0

    def ctr(self, *args: str) -> str:
        done = subprocess.run(
            [str(self.binaries.ctr), "--address", str(self.socket), "-n", NAMESPACE, *args],
            capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        if done.returncode != 0:
            raise RuntimeError(f"ctr {' '.join(args)}: {done.stderr.strip()}")
        return done.stdout

    def stop(self) -> None:
        """Stop containerd and every shim it started (they leave its process group on purpose)."""
        if self.process is not None:
            self.process.stop()
        kill_pids(pids_matching(str(self.socket)))
        if shutil.which("ip"):  # the CNI plugin made the bridge; iproute2 removes it (nothing routes to it anyway)
            subprocess.run(["ip", "link", "delete", self.bridge], capture_output=True, check=False)
