"""Only our slices, and all of them: a LIST that holds more than we asked for changes nothing of others.

On main 67e3c9c the publisher trusted the server's field selector: given a LIST that also held another
node's slice of our driver it deleted that slice, and stop() deleted every slice the LIST returned.
Its writes carried no Content-Type, which a real API server refuses (415).
"""

from __future__ import annotations

import copy
from collections.abc import Iterator

import pytest

from device_plugin.dra.inventory import build_devices
from device_plugin.dra_helper.api.publisher import SlicePublisher
from device_plugin.dra_helper.api.slices import build_slices, slice_name
from device_plugin.nvml.fake.machine import FakeNvml
from testbed.api_standin import ApiStandin
from tests.allocation.machines import topology_of

DRIVER, NODE, OTHER_NODE = "gpu.nvidia.com", "node-a", "node-b"
DGX1 = build_devices(FakeNvml.from_machine("dgx1-v100"), topology_of("dgx1-v100"))[0]


@pytest.fixture
def api() -> Iterator[ApiStandin]:
    standin = ApiStandin().up()
    standin.add_node(NODE)
    standin.ignore_field_selector = True  # a server (or proxy) that answers every LIST with everything
    yield standin
    standin.down()
    assert standin.invalid == []


def _foreign(driver: str, node: str, name: str, generation: int = 7) -> dict[str, object]:
    """A slice someone else published: another node's (same driver), or another driver's (same node)."""
    (obj,) = build_slices(DGX1[:2], node_name=node, driver_name=driver, generation=generation)
    obj["metadata"] = {"name": name}
    return obj


FOREIGN = {
    "other-node-same-driver": lambda: _foreign(DRIVER, OTHER_NODE, slice_name(OTHER_NODE, DRIVER, 0)),
    "same-node-other-driver": lambda: _foreign("nic.example.com", NODE, f"{NODE}-nic-example-com-0"),
    "other-node-named-like-ours": lambda: _foreign(DRIVER, OTHER_NODE, slice_name(NODE, DRIVER, 1)),
}


def _snapshot(api: ApiStandin, names: list[str]) -> list[object]:
    return [copy.deepcopy(api.slices.get(n)) for n in names]


@pytest.mark.parametrize("kinds", [sorted(FOREIGN)], ids=["all-foreign-kinds-at-once"])
def test_reconcile_and_stop_never_touch_slices_that_are_not_ours(api: ApiStandin, kinds: list[str]) -> None:
    foreign = [FOREIGN[k]() for k in kinds]
    for obj in foreign:
        api.add_slice(obj)
    names = [str(o["metadata"]["name"]) for o in foreign]  # type: ignore[index]
    before = _snapshot(api, names)
    p = SlicePublisher(api.transport(), driver_name=DRIVER, node_name=NODE)
    assert p.reconcile(DGX1) == 1  # generation 1: the other node's generation 7 is not ours to continue
    assert p.reconcile(DGX1[1:]) == 2
    assert p.stop(unpublish=True)
    assert api.pool(DRIVER, NODE) == []  # ours are gone ...
    assert _snapshot(api, names) == before  # ... and nothing else was written or deleted
    touched = [path for method, path in api.requests if method in ("PUT", "DELETE")]
    assert not any(path.endswith("/" + n) for path in touched for n in names), touched


def test_a_slice_name_taken_by_another_node_is_refused_not_overwritten(api: ApiStandin) -> None:
    """Our name is held by another node's slice (an earlier name clash): no update over it."""
    squatter = _foreign(DRIVER, OTHER_NODE, slice_name(NODE, DRIVER, 0))
    api.add_slice(squatter)
    before = _snapshot(api, [slice_name(NODE, DRIVER, 0)])
    p = SlicePublisher(api.transport(), driver_name=DRIVER, node_name=NODE)
    with pytest.raises(RuntimeError, match="another driver or node"):
        p.reconcile(DGX1)
    assert _snapshot(api, [slice_name(NODE, DRIVER, 0)]) == before


def test_writes_carry_a_json_content_type(api: ApiStandin) -> None:
    """The stand-in answers 415 to a body without one, as kube-apiserver does."""
    api.ignore_field_selector = False
    p = SlicePublisher(api.transport(), driver_name=DRIVER, node_name=NODE)
    assert p.reconcile(DGX1) == 1  # create
    assert p.reconcile(DGX1[:3]) == 2  # update
    assert [m for m, path in api.requests if "resourceslices" in path and m in ("POST", "PUT")] == ["POST", "PUT"]
