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

from api import deviceplugin_pb2 as pb
from device_plugin.devices import ContainerAllocation

GOLDEN_DIR = Path(__file__).parent / "golden"
UPDATE = os.environ.get("UPDATE_GOLDEN") == "1"


def to_wire(allocation: ContainerAllocation) -> dict[str, Any]:
    """Serialise through the real proto message, so field names and types are the kubelet's."""
    message = pb.ContainerAllocateResponse(
        envs=dict(allocation.envs),
        mounts=[
            pb.Mount(container_path=m.container_path, host_path=m.host_path, read_only=m.read_only)
            for m in allocation.mounts
        ],
        devices=[
            pb.DeviceSpec(container_path=d.container_path, host_path=d.host_path, permissions=d.permissions)
            for d in allocation.device_specs
        ],
        annotations=dict(allocation.annotations),
        cdi_devices=[pb.CDIDevice(name=n) for n in allocation.cdi_devices],
    )
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
