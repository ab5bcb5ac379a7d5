"""Device-plugin mode on the real kubelet: a fixture that runs our daemon with given flags and stops it after."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from testbed.realnode.cluster import RealCluster
from testbed.realnode.our_daemon import OurDaemon

NAMESPACE = "default"
GPU = "nvidia.com/gpu"


def allocatable(cluster: RealCluster) -> dict[str, str]:
    return dict(cluster.node().get("status", {}).get("allocatable", {}))


def wait_allocatable(cluster: RealCluster, expected: dict[str, str], timeout_s: float = 30) -> dict[str, str]:
    """Wait until the Node's allocatable holds exactly these values for these resources."""

    def matches() -> dict[str, str] | None:
        now = allocatable(cluster)
        return now if all(now.get(k) == v for k, v in expected.items()) else None

    found: dict[str, str] = cluster.kubectl.wait_for(f"allocatable {expected}", matches, timeout_s, every_s=0.5)
    return found


@pytest.fixture
def device_plugin(cluster: RealCluster) -> Iterator[Callable[..., OurDaemon]]:
    """Start our daemon in device-plugin mode: device_plugin("--machine", "dgx1-v100", env={...})."""
    started: list[OurDaemon] = []

    def start(*args: str, env: dict[str, str] | None = None, name: str = "dp") -> OurDaemon:
        daemon = OurDaemon(cluster, f"{name}-{len(started)}", list(args), env or {})
        started.append(daemon)
        return daemon.start()

    yield start
    for daemon in started:
        daemon.stop()
    cluster.kubectl.run("delete", "pods", "--all", "-n", NAMESPACE, "--grace-period=0", "--force", "--wait=true")


def env_of(log: str, key: str) -> str:
    """The value of `key` in an `env` dump."""
    for line in log.splitlines():
        if line.startswith(f"{key}="):
            return line.split("=", 1)[1]
    raise AssertionError(f"{key} not in the container's environment:\n{log}")
