"""The real node: one real control plane and kubelet for the whole session, judged by nothing of ours.

Every test here is marked `real_node`. Where the programs are missing (GPU_DEVICE_PLUGIN_KUBE_BIN unset,
no containerd, not root) each test skips and says which is missing; `.ci/run` provides them all
(docs/real-node.md). `make test` runs this folder in a pytest process of its own, after the rest: one
node, started once.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from testbed.realnode import binaries
from testbed.realnode.cluster import RealCluster

_missing: list[str] = []


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "real_node" in item.nodeid:
            item.add_marker(pytest.mark.real_node)


@pytest.fixture(scope="session")
def cluster() -> Iterator[RealCluster]:
    if _missing:
        pytest.skip(_missing[0])
    try:
        found = binaries.find()
    except binaries.Missing as missing:
        _missing.append(f"no real node here: {missing}")
        pytest.skip(_missing[0])
    started = RealCluster.create(found)
    try:
        started.start()
        yield started
    finally:
        started.stop()
