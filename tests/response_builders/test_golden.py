"""Allocate responses of every device-list strategy, pinned by golden files (see golden_io for regeneration)."""

from __future__ import annotations

import itertools
from typing import Any

import pytest

from device_plugin.allocation.response_builders import StrategyResponseBuilder
from tests.response_builders.cases import CASES, MIG_INDICES, Case
from tests.response_builders.golden_io import GOLDEN_DIR, UPDATE, check_golden, to_wire


def build(case: Case, order: tuple[int, ...] | None = None) -> dict[str, Any]:
    devices = list(case.devices) if order is None else [case.devices[i] for i in order]
    builder = StrategyResponseBuilder(case.settings, case.nodes, MIG_INDICES)
    return to_wire(builder.build(devices))


def golden_document(case: Case) -> dict[str, Any]:
    # The input travels with the answer, so a reviewer can read each file on its own.
    settings = case.settings
    return {
        "input": {
            "device_list_strategies": [str(x) for x in settings.device_list_strategies],
            "device_id_strategy": str(settings.device_id_strategy),
            "pass_device_specs": settings.pass_device_specs,
            "host_dev_root": settings.host_dev_root,
            "cdi_annotation_prefix": settings.cdi_annotation_prefix,
            "cdi_kind": settings.cdi_kind,
            "device_ids": [d.id for d in case.devices],
            "dev_nodes_present": [*case.nodes.control, *(f"/dev/nvidia{m}" for m in sorted(case.nodes.gpu_minors))],
        },
        "response": build(case),
    }


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_allocate_response_matches_golden(case: Case) -> None:
    check_golden(case.name, golden_document(case))


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_response_does_not_depend_on_device_order(case: Case) -> None:
    expected = build(case)
    for order in itertools.permutations(range(len(case.devices))):
        assert build(case, order) == expected, order


def test_every_golden_file_belongs_to_a_case() -> None:
    if UPDATE:
        pytest.skip("regenerating")
    stale = {p.stem for p in GOLDEN_DIR.glob("*.json")} - {c.name for c in CASES}
    assert not stale, f"golden files without a case (delete them): {sorted(stale)}"
