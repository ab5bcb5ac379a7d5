"""Golden files for Allocate responses: the ContainerAllocateResponse each case puts on the wire, as JSON.

Regenerate after an intended change with:
    UPDATE_GOLDEN=1 .venv/bin/python -m pytest -q tests/response_builders
then review `git diff tests/response_builders/golden` before committing.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from google.protobuf import json_format

from device_plugin.core.devices import ContainerAllocation
from device_plugin.dp_helper.servicer import allocation_to_pb

GOLDEN_DIR = Path(__file__).parent / "golden"
UPDATE = os.environ.get("UPDATE_GOLDEN") == "1"


def to_wire(allocation: ContainerAllocation) -> dict[str, Any]:
    """Serialise through the servicer's own translation to the proto message (the kubelet's names and types)."""
    message = allocation_to_pb(allocation)
    return json_format.MessageToDict(message, preserving_proto_field_name=True)


def render(document: dict[str, Any]) -> str:
    return json.dumps(document, indent=2, sort_keys=True) + "\n"


def check_golden(name: str, document: dict[str, Any]) -> None:
    path = GOLDEN_DIR / f"{name}.json"
    text = render(document)
    if UPDATE:
        path.write_text(text)
        return
    assert path.exists(), f"no golden file {path}; run with UPDATE_GOLDEN=1 to create it"
    assert text == path.read_text(), f"{path} differs; if intended, regenerate with UPDATE_GOLDEN=1"
