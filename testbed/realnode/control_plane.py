"""etcd, kube-apiserver, kube-controller-manager and kube-scheduler on 127.0.0.1, each with its own ports.

The API server serves every DRA gate of v1.36 (listed explicitly, as on the kubelet), resource.k8s.io v1
and the two betas, Node+RBAC authorization, and `--endpoint-reconciler-type=none` (a loopback address is no
valid endpoint). The controller manager runs the service-account token and resource-claim controllers (and
the node lifecycle one, which lifts the not-ready taint once the kubelet reports Ready). Client rate limits
are lifted (QPS 500) so that the benchmarks measure the scheduler, not the controller manager's 20 QPS.
"""

from __future__ import annotations

import socket
import ssl
from dataclasses import dataclass
from pathlib import Path

import yaml

from testbed.realnode import pki as pki_module
from testbed.realnode.binaries import Binaries
from testbed.realnode.processes import Process, free_port, https_ok, wait_until

# Every DRA gate v1.36 knows of that a driver may meet in a cluster (the GA ones are locked on and left out).
FEATURE_GATES = (
    "DRAConsumableCapacity=true,DRADeviceTaints=true,DRADeviceTaintRules=true,DRAExtendedResource=true,"
    "DRAPartitionableDevices=true,DRAResourceClaimDeviceStatus=true,ResourceHealthStatus=true"
)
CLIENT_QPS = "500"
CLIENT_BURST = "1000"


@dataclass
class ControlPlane:
    folder: Path
    binaries: Binaries
    node_name: str
    etcd_port: int = 0
    api_port: int = 0
    processes: list[Process] | None = None
    pki: pki_module.Pki | None = None
    # "*" (every default controller); "*,-node-lifecycle-controller" where the nodes are hand-made (no kubelet
    # renews their leases, so that controller would taint them unreachable)
    controllers: str = "*"

    @property
    def server(self) -> str:
        return f"https://127.0.0.1:{self.api_port}"

    @property
    def admin_kubeconfig(self) -> Path:
        return self.folder / "pki" / "admin.kubeconfig"

    def ssl_context(self) -> ssl.SSLContext:
        assert self.pki is not None
        context = ssl.create_default_context(cafile=str(self.pki.ca.cert))
        admin = self.pki.client("admin")
        context.load_cert_chain(str(admin.cert), str(admin.key))
        return context

    def start(self) -> None:
        self.processes = []
        self.pki = pki_module.make(
            self.binaries.openssl, self.folder / "pki", socket.gethostname(),
            {
                "admin": "/O=system:masters/CN=real-node-admin",
                "controller-manager": "/CN=system:kube-controller-manager",
                "scheduler": "/CN=system:kube-scheduler",
                "kubelet": f"/O=system:nodes/CN=system:node:{self.node_name}",
                "apiserver-kubelet-client": "/O=system:masters/CN=kube-apiserver-kubelet-client",
            },
        )  # fmt: skip
        self.etcd_port, self.api_port = free_port(), free_port()
        self._start_etcd()
        self._start_apiserver()
        for name in ("admin", "controller-manager", "scheduler", "kubelet"):
            pki_module.client_kubeconfig(self.pki, name, self.server)
        self._start_controller_manager()
        self._start_scheduler()

    def stop(self) -> None:
        for process in reversed(self.processes or []):
            process.stop()

    def _run(self, name: str, argv: list[str]) -> Process:
        process = Process(name, argv, self.folder / "logs" / f"{name}.log").start()
        assert self.processes is not None
        self.processes.append(process)
        return process

    def _start_etcd(self) -> None:
        url = f"http://127.0.0.1:{self.etcd_port}"
        etcd = self._run(
            "etcd",
            [
                str(self.binaries.etcd), "--data-dir", str(self.folder / "etcd"),
                "--listen-client-urls", url, "--advertise-client-urls", url,
                "--listen-peer-urls", f"http://127.0.0.1:{free_port()}",
                "--unsafe-no-fsync",  # a throw-away store: fsync would only slow every write
                "--log-level", "warn",
            ],
        )  # fmt: skip

        def answers() -> bool:
            try:
                with socket.create_connection(("127.0.0.1", self.etcd_port), timeout=1):
                    return True
            except OSError:
                return False

        wait_until("etcd to listen", answers, 30, etcd)

    def _start_apiserver(self) -> None:
        assert self.pki is not None
        pki = self.pki
        kubelet_client = pki.client("apiserver-kubelet-client")
        api = self._run(
            "kube-apiserver",
            [
                str(self.binaries.kube_apiserver),
                f"--etcd-servers=http://127.0.0.1:{self.etcd_port}",
                "--bind-address=127.0.0.1", "--advertise-address=127.0.0.1", f"--secure-port={self.api_port}",
                f"--tls-cert-file={pki.serving.cert}", f"--tls-private-key-file={pki.serving.key}",
                f"--client-ca-file={pki.ca.cert}",
                f"--service-account-key-file={pki.service_account_pub}",
                f"--service-account-signing-key-file={pki.service_account_key}",
                "--service-account-issuer=https://kubernetes.default.svc",
                "--authorization-mode=Node,RBAC", "--endpoint-reconciler-type=none",
                "--service-cluster-ip-range=10.96.0.0/24",
                f"--kubelet-client-certificate={kubelet_client.cert}",
                f"--kubelet-client-key={kubelet_client.key}",
                "--kubelet-preferred-address-types=Hostname,InternalIP",
                "--runtime-config=resource.k8s.io/v1beta1=true,resource.k8s.io/v1beta2=true",
                f"--feature-gates={FEATURE_GATES}",
                "--enable-priority-and-fairness=false",  # one client at a time here; its queues only add latency
            ],
        )  # fmt: skip
        context = ssl.create_default_context(cafile=str(pki.ca.cert))
        admin = pki.client("admin")
        context.load_cert_chain(str(admin.cert), str(admin.key))
        wait_until("kube-apiserver /readyz", https_ok(f"{self.server}/readyz", context), 90, api)

    def _start_controller_manager(self) -> None:
        assert self.pki is not None
        kubeconfig = self.folder / "pki" / "controller-manager.kubeconfig"
        self._run(
            "kube-controller-manager",
            [
                str(self.binaries.kube_controller_manager),
                f"--kubeconfig={kubeconfig}", f"--authentication-kubeconfig={kubeconfig}",
                f"--authorization-kubeconfig={kubeconfig}",
                "--bind-address=127.0.0.1", f"--secure-port={free_port()}", "--leader-elect=false",
                f"--service-account-private-key-file={self.pki.service_account_key}",
                f"--root-ca-file={self.pki.ca.cert}", "--use-service-account-credentials=true",
                f"--controllers={self.controllers}",
                f"--kube-api-qps={CLIENT_QPS}", f"--kube-api-burst={CLIENT_BURST}",
                f"--feature-gates={FEATURE_GATES}",
            ],
        )  # fmt: skip

    def _start_scheduler(self) -> None:
        kubeconfig = self.folder / "pki" / "scheduler.kubeconfig"
        config = self.folder / "scheduler.yaml"
        config.write_text(
            yaml.safe_dump(
                {
                    "apiVersion": "kubescheduler.config.k8s.io/v1",
                    "kind": "KubeSchedulerConfiguration",
                    "clientConnection": {"kubeconfig": str(kubeconfig), "qps": 500, "burst": 1000},
                    "leaderElection": {"leaderElect": False},
                }
            )
        )
        self._run(
            "kube-scheduler",
            [
                str(self.binaries.kube_scheduler), f"--config={config}",
                f"--authentication-kubeconfig={kubeconfig}", f"--authorization-kubeconfig={kubeconfig}",
                "--bind-address=127.0.0.1", f"--secure-port={free_port()}",
                f"--feature-gates={FEATURE_GATES}",
            ],
        )  # fmt: skip

    def scheduler_process(self) -> Process:
        return next(p for p in self.processes or [] if p.name == "kube-scheduler")
