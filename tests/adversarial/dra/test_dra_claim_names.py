"""A claim name no ResourceClaim can have is that claim's short error, and is never sent to the API server.

On main 67e3c9c a 1 MiB claim name went into the GET's URL and came back as a 1 MiB error and log line.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path

import pytest

from device_plugin.dra.front_end import DraFrontEnd
from device_plugin.dra_helper.api.kube import api_client
from device_plugin.standins.kubelet_dra import DraKubeletStandin
from testbed.api_standin import ApiStandin
from tests.adversarial.dra.harness import wait_until

DRIVER, NODE = "gpu.nvidia.com", "node-a"
MAX_ERROR_CHARS = 2048  # a per-claim error, whatever the claim's name
MAX_LOG_CHARS = 8192


@pytest.fixture
def api() -> Iterator[ApiStandin]:
    standin = ApiStandin().up()
    standin.add_node(NODE)
    yield standin
    standin.down()


BAD = {
    "1-MiB-name": ("ns", "c" * (1024 * 1024)),
    "254-char-name": ("ns", "c" * 254),
    "upper-case-name": ("ns", "Claim"),
    "slash-in-name": ("ns", "a/../../nodes/node-a"),
    "64-char-namespace": ("n" * 64, "claim"),
    "empty-name": ("ns", ""),
}


@pytest.mark.parametrize("case", sorted(BAD), ids=sorted(BAD))
def test_an_impossible_claim_name_is_a_short_per_claim_error_and_no_api_call(
    api: ApiStandin, root: Path, caplog: pytest.LogCaptureFixture, case: str
) -> None:
    namespace, name = BAD[case]
    driver = DraFrontEnd(api_client(api.host), node_name=NODE, driver_name=DRIVER, kubelet_dir=root)
    driver.start()
    try:
        kubelet = DraKubeletStandin(root / "plugins_registry")
        plugin = kubelet.wait_for_plugin()
        wait_until(lambda: driver.publisher.wait_synced(0.0))
        with caplog.at_level(logging.DEBUG):
            answers = kubelet.prepare(plugin, [(namespace, "uid-bad", name), ("ns", "uid-gone", "gone")])
        error = answers["uid-bad"].error  # type: ignore[attr-defined]
        assert "not a valid" in error and len(error) <= MAX_ERROR_CHARS
        assert "does not exist" in answers["uid-gone"].error  # type: ignore[attr-defined]  # the other was read
        claim_reads = [p for m, p in api.requests if "/resourceclaims/" in p]
        assert claim_reads == ["/apis/resource.k8s.io/v1/namespaces/ns/resourceclaims/gone"]
        assert all(len(r.getMessage()) <= MAX_LOG_CHARS for r in caplog.records)
    finally:
        driver.stop(2.0)
