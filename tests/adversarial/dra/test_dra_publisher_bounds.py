"""What the publisher builds and says stays within bounds, whatever the node name or the API server's answer.

On main 67e3c9c, node names of 237+ characters gave slice names cut at 253 characters: two nodes that
share a long prefix collided on one name, and some names ended in "-" (invalid). An API server's error
answer went whole into the log and /readyz (a 1 MiB body: a 1 MiB line).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterator
from dataclasses import replace

import pytest

from device_plugin.dra.inventory import build_devices
from device_plugin.dra_helper.api.publisher import MAX_ERROR_CHARS, SlicePublisher
from device_plugin.dra_helper.api.slices import MAX_DEVICES_PER_SLICE, slice_name
from device_plugin.nvml.fake.machine import FakeNvml
from testbed.api_standin import ApiStandin
from tests.adversarial.dra.harness import wait_until
from tests.allocation.machines import topology_of

DRIVER = "gpu.nvidia.com"
DGX1 = build_devices(FakeNvml.from_machine("dgx1-v100"), topology_of("dgx1-v100"))[0]
DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")


def _node(length: int, last: str = "a") -> str:
    """A valid node name (DNS subdomain) of `length` characters: labels of 62 'n's with dots, then `last`."""
    body = ("n" * 62 + ".") * 5
    body = body[: length - 1]
    return (body[:-1] + "n" if body.endswith(".") else body) + last


NODES = {
    "short": ["node-a", "node-b"],
    "236-chars": [_node(236, "a"), _node(236, "b")],
    "237-chars": [_node(237, "a"), _node(237, "b")],
    "cut-right-after-a-dot": [_node(250, "a"), _node(250, "b")],
    "253-chars": [_node(253, "a"), _node(253, "b")],
    "253-with-dashes-at-the-cut": ["n" * 200 + "-" * 52 + "a", "n" * 200 + "-" * 52 + "b"],
}


@pytest.mark.parametrize("kind", sorted(NODES), ids=sorted(NODES))
def test_slice_names_are_valid_and_distinct_for_node_names_up_to_253_characters(kind: str) -> None:
    nodes = NODES[kind]
    assert all(len(n) <= 253 and DNS_SUBDOMAIN.match(n) for n in nodes), "the case must be a valid node name"
    names = [slice_name(node, DRIVER, number) for node in nodes for number in (0, 1, 10)]
    assert len(set(names)) == len(names), names
    for name in names:
        assert len(name) <= 253 and DNS_SUBDOMAIN.match(name), name


@pytest.mark.parametrize("kind", sorted(NODES), ids=sorted(NODES))
def test_name_order_is_slice_order_past_9_15_and_255_slices(kind: str) -> None:
    """Kubernetes (1.36+) takes a pool's slices in name order: it must be the order we listed devices in."""
    for node in NODES[kind]:
        names = [slice_name(node, DRIVER, number) for number in range(300)]
        assert names == sorted(names)


def test_a_short_node_name_gets_the_plain_name_with_a_five_digit_hex_index() -> None:
    assert [slice_name("node-a", DRIVER, n) for n in (0, 10, 255)] == [
        f"node-a-{DRIVER.replace('.', '-')}-00000",
        f"node-a-{DRIVER.replace('.', '-')}-0000a",
        f"node-a-{DRIVER.replace('.', '-')}-000ff",
    ]


@pytest.fixture
def api() -> Iterator[ApiStandin]:
    standin = ApiStandin().up()
    yield standin
    standin.down()
    assert standin.invalid == []


def test_a_pool_of_a_253_character_node_is_published_in_several_slices(api: ApiStandin) -> None:
    node = _node(253)
    api.add_node(node)
    devices = tuple(replace(DGX1[i % len(DGX1)], name=f"gpu-{i}") for i in range(MAX_DEVICES_PER_SLICE + 1))
    p = SlicePublisher(api.transport(), driver_name=DRIVER, node_name=node)
    assert p.reconcile(devices) == 1
    names = [s["metadata"]["name"] for s in api.pool(DRIVER, node)]
    assert sorted(names) == sorted(slice_name(node, DRIVER, n) for n in (0, 1))


def test_an_api_servers_huge_error_answer_is_cut_in_the_log_and_the_readiness_text(
    api: ApiStandin, caplog: pytest.LogCaptureFixture
) -> None:
    api.add_node("node-a")
    huge = "x" * (1024 * 1024)
    original = api.handle

    def answer_huge(method: str, path: str, *args: object, **kwargs: object) -> tuple[int, object]:
        if path.endswith("/resourceslices") and method == "POST":
            return 400, {"kind": "Status", "code": 400, "message": huge, "reason": "BadRequest"}
        return original(method, path, *args, **kwargs)  # type: ignore[arg-type]

    api.handle = answer_huge  # type: ignore[method-assign]
    p = SlicePublisher(api.transport(), driver_name=DRIVER, node_name="node-a", backoff_max_s=0.2)
    with caplog.at_level(logging.WARNING, logger="device_plugin.dra_helper.api.publisher"):
        p.start()
        p.request(DGX1)
        wait_until(lambda: "400" in p.error)
        p.stop(2.0, unpublish=False)
    assert len(p.error) <= MAX_ERROR_CHARS
    failures = [r.getMessage() for r in caplog.records if "publishing ResourceSlices failed" in r.getMessage()]
    assert failures and all(len(m) <= MAX_ERROR_CHARS + 200 for m in failures)
