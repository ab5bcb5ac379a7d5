"""Our daemon on the real node, as a process of the host, in either mode.

The DaemonSet's image is not run here (building it takes minutes; `make image-check` builds and runs it
apart), so the daemon runs from the checkout's virtualenv with what the DaemonSet would give it: NODE_NAME,
POD_UID and, in DRA mode, a service-account token bound to a pod of our service account on this node (a
"holder" pod that only sleeps), so that RBAC and the admission policy see exactly what they would see from
the DaemonSet's pod (user extra authentication.kubernetes.io/node-name).
"""

from __future__ import annotations

import json
import os
import signal
import sys
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from testbed.realnode import pki
from testbed.realnode.cluster import RealCluster
from testbed.realnode.images import BUSYBOX_IMAGE
from testbed.realnode.processes import Process, free_port, wait_until

NAMESPACE = "gpu-device-plugin"  # deploy/base's namespace and service account
SERVICE_ACCOUNT = "gpu-device-plugin"
CLI = Path(sys.executable).parent / "gpu-device-plugin"


def holder_pod(cluster: RealCluster, name: str) -> dict[str, Any]:
    """A pod of our service account on the node, doing nothing: what a driver token is bound to."""
    manifest = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": NAMESPACE, "labels": {"real-node/holder": "true"}},
        "spec": {
            "serviceAccountName": SERVICE_ACCOUNT,
            "automountServiceAccountToken": False,
            "nodeName": cluster.node_name,
            "terminationGracePeriodSeconds": 0,
            "containers": [
                {"name": "holder", "image": BUSYBOX_IMAGE, "imagePullPolicy": "Never", "command": ["sleep", "1000000"]}
            ],
        },
    }
    cluster.kubectl.apply(json.dumps(manifest))
    pod: dict[str, Any] = cluster.kubectl.get("pod", "-n", NAMESPACE, name)
    return pod


def bound_kubeconfig(cluster: RealCluster, pod: dict[str, Any], path: Path) -> Path:
    """A kubeconfig holding a token of our service account bound to `pod` (TokenRequest, 2 h)."""
    meta = pod["metadata"]
    token = cluster.kubectl.run(
        "create", "token", "-n", NAMESPACE, SERVICE_ACCOUNT, "--bound-object-kind=Pod",
        f"--bound-object-name={meta['name']}", f"--bound-object-uid={meta['uid']}", "--duration=2h",
    ).strip()  # fmt: skip
    assert cluster.control_plane is not None and cluster.control_plane.pki is not None
    plane = cluster.control_plane
    assert plane.pki is not None
    return pki.write_kubeconfig(path, plane.server, plane.pki.ca.cert, {"token": token})


@dataclass
class OurDaemon:
    """`gpu-device-plugin run` on the real node. `args` are its flags (e.g. --machine); `env` its extra env."""

    cluster: RealCluster
    name: str
    args: list[str]
    env: dict[str, str] = field(default_factory=dict)
    metrics_port: int = 0
    process: Process | None = None
    fake_events: Path | None = None
    _folder: Path | None = None

    @property
    def folder(self) -> Path:
        """This daemon's own folder (its logs, its fake events), kept across its restarts. A daemon of a later
        test with the same name gets another: it must not replay the faults or read the log lines of this one."""
        if self._folder is None:
            base = self.cluster.folder / "daemons" / self.name
            self._folder = next(f for n in range(1, 1000) if not (f := base.with_name(f"{base.name}.{n}")).exists())
        return self._folder

    def start(self, wait_ready: bool = True) -> OurDaemon:
        self.folder.mkdir(parents=True, exist_ok=True)
        self.metrics_port = self.metrics_port or free_port()
        self.fake_events = self.folder / "fake-events.jsonl"
        self.fake_events.touch()
        env = {**os.environ, "NODE_NAME": self.cluster.node_name, **self.env}
        argv = [
            str(CLI), "run", *self.args, f"--metrics-address=127.0.0.1:{self.metrics_port}",
            f"--fake-events={self.fake_events}",
        ]  # fmt: skip
        runs = len(list(self.folder.glob("daemon-*.log")))
        self.process = Process(f"gpu-device-plugin {self.name}", argv, self.folder / f"daemon-{runs + 1}.log")
        self.process.start(env=env)
        if wait_ready:
            self.wait_ready()
        return self

    def wait_ready(self, timeout_s: float = 30) -> None:
        assert self.process is not None
        wait_until(f"{self.name} /readyz", lambda: self.readyz()[0] == 200, timeout_s, self.process)

    def _get(self, path: str) -> tuple[int, str]:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.metrics_port}{path}", timeout=5) as answer:
                return int(answer.status), answer.read().decode()
        except urllib.error.HTTPError as error:
            return int(error.code), error.read().decode()
        except OSError as error:
            return 0, str(error)

    def readyz(self) -> tuple[int, str]:
        return self._get("/readyz?verbose")

    def metrics(self) -> str:
        return self._get("/metrics")[1]

    def inject(self, event: dict[str, Any]) -> None:
        """A fault for the simulated machine (--fake-events), e.g. {"gpu": 3, "xid": 79}."""
        assert self.fake_events is not None
        with self.fake_events.open("a") as out:
            out.write(json.dumps(event) + "\n")

    def log(self) -> str:
        return "\n".join(p.read_text(errors="replace") for p in sorted(self.folder.glob("daemon-*.log")))

    def stop(self, sig: int = signal.SIGTERM, grace_s: float = 15) -> int | None:
        return None if self.process is None else self.process.stop(grace_s=grace_s, sig=sig)

    def running(self) -> bool:
        return self.process is not None and self.process.running()


def dra_env(cluster: RealCluster, name: str, *, per_instance: bool = False) -> dict[str, str]:
    """What the DaemonSet's pod `name` gives our DRA driver: KUBECONFIG with a token bound to that pod (a
    holder made here), POD_UID, and SOCKET_NAMES=per-instance for the rolling-update mode."""
    pod = holder_pod(cluster, name)
    kubeconfig = bound_kubeconfig(cluster, pod, cluster.folder / f"{name}.kubeconfig")
    env = {"KUBECONFIG": str(kubeconfig), "POD_UID": pod["metadata"]["uid"]}
    if per_instance:
        env["SOCKET_NAMES"] = "per-instance"
    return env


def dra_args(cluster: RealCluster, *args: str) -> list[str]:
    """`run` flags for the DRA mode on this node: the kubelet directory is devicePluginDir's parent."""
    assert cluster.kubelet is not None
    return ["--mode", "dra", f"--device-plugin-dir={cluster.kubelet.root_dir / 'device-plugins'}", *args]
