"""The API stand-in's ResourceSlice collection: list, create, read, replace and delete, as the API
server does.

Boundary: the slice requests once ApiStandin (api_server.py) has routed them, under its lock: the
resourceVersion rules (409 on a stale PUT, AlreadyExists on a second POST), the schema check of
every write, and how taints are stored (api_objects.taints_as_stored). Lifecycle, faults that touch
every request, watch streams and the other endpoints stay in api_server.py. Misbehaving on purpose:
`writes_lost` answers a PUT with 200 and keeps the old object (a server whose answer is not what it
stored); `refuses_taints` answers a write with device taints 400 (strict decoding on a server
without the field). `dryRun=All` on a POST or PUT answers what would be stored, through every check,
and stores nothing.
"""

from __future__ import annotations

import itertools
import json
import uuid
from typing import Any

from device_plugin.standins.api_objects import (
    GROUP,
    RELEASE_OF,
    device_body,
    matches,
    taints_as_stored,
    too_many_tainted,
)
from device_plugin.standins.api_objects import status_body as _status


class SliceWrites:
    """Mixed into ApiStandin, which sets these attributes and provides `_event`, `_remove` and the
    rest."""

    slices: dict[str, dict[str, Any]]
    invalid: list[str]
    ignore_field_selector: bool
    keeps_taints: bool
    schema_check: bool
    validate: Any
    _events: list[tuple[int, str, dict[str, Any]]]
    _races: set[str]
    _rv: itertools.count[int]
    # A PUT answered 200 but not stored (the object stays as it was): "old" answers with the object
    # kept, "echo" with the body sent and a fresh resourceVersion, as if it had been stored; ""
    # stores every write.
    writes_lost: str = ""
    # True: a write whose devices carry taints is refused with 400, as a server without the field
    # that decodes strictly does (the taints are not dropped: the whole write fails).
    refuses_taints: bool = False

    def _refusal(self, body: Any) -> tuple[int, Any] | None:
        """The 400 a server that refuses the taints field answers `body` with; None when it is not
        refused."""
        spec = body.get("spec") if isinstance(body, dict) else None
        devices = spec.get("devices") if isinstance(spec, dict) else None
        for index, device in enumerate(
            devices if self.refuses_taints and isinstance(devices, list) else ()
        ):
            if "taints" in device_body(device):
                message = f'strict decoding error: unknown field "spec.devices[{index}].taints"'
                return 400, _status(400, message, "BadRequest")
        return None

    def _dry(self, body: dict[str, Any]) -> dict[str, Any]:
        """A dry run's answer: the object as it would be stored (checked, taints dropped or
        stamped), not stored."""
        answer = json.loads(json.dumps(body))
        answer["metadata"].setdefault("uid", str(uuid.uuid4()))
        return answer

    def _lost_write(self, name: str, body: dict[str, Any]) -> dict[str, Any]:
        if self.writes_lost == "old":
            return self.slices[name]
        answer = json.loads(json.dumps(body))
        answer["metadata"]["resourceVersion"] = str(next(self._rv))
        return answer

    def _event(self, kind: str, obj: dict[str, Any]) -> None:
        raise NotImplementedError

    def _remove(self, name: str) -> None:
        raise NotImplementedError

    def _concurrent_write(self, name: str) -> None:
        raise NotImplementedError

    def _slices(
        self,
        method: str,
        version: str,
        name: str | None,
        query: dict[str, str],
        body: Any,
        schema_error: str | None,
    ) -> tuple[int, Any]:
        if name is None and method == "GET":
            fields = "" if self.ignore_field_selector else query.get("fieldSelector", "")
            items = [
                o
                for _, o in sorted(self.slices.items())
                if matches(o, fields, query.get("labelSelector", ""))
            ]
            listed = {"resourceVersion": str(self._events[-1][0] if self._events else 0)}
            kind = "ResourceSliceList"
            return 200, {
                "apiVersion": f"{GROUP}/{version}",
                "kind": kind,
                "metadata": listed,
                "items": items,
            }
        if name is None and method == "POST":
            if schema_error is not None:
                self.invalid.append(schema_error)
                return 422, _status(422, "invalid object")
            new = body["metadata"]["name"]
            if new in self.slices:
                return 409, _status(409, f'resourceslices "{new}" already exists', "AlreadyExists")
            return 201, self._dry(body) if query.get("dryRun") == "All" else self._store(body)
        if name not in self.slices:
            return 404, _status(404, f'resourceslices "{name}" not found')
        if method == "GET":
            return 200, self.slices[name]
        if method == "DELETE":
            self._remove(name)
            return 200, _status(200, "deleted", "", "Success")
        if method == "PUT":
            if name in self._races:
                self._races.discard(name)
                self._concurrent_write(name)
            if schema_error is not None:
                self.invalid.append(schema_error)
                return 422, _status(422, "invalid object")
            if (
                body["metadata"].get("resourceVersion")
                != self.slices[name]["metadata"]["resourceVersion"]
            ):
                return 409, _status(
                    409,
                    "the object has been modified; please apply your changes to the latest version",
                )
            if query.get("dryRun") == "All":
                return 200, self._dry(body)
            if self.writes_lost:
                return 200, self._lost_write(name, body)
            return 200, self._store(body)
        return 405, _status(405, f"{method} not allowed")

    def _schema_error(self, obj: Any, path: str) -> str | None:
        """Why `obj`, written to `path` (/apis/resource.k8s.io/<version>/...), is refused with 422;
        None when it is valid, or when the path names no version we serve (404 then). Drops or
        stamps taints first."""
        parts = [p for p in path.split("/") if p]
        if len(parts) < 3 or parts[:2] != ["apis", GROUP] or parts[2] not in RELEASE_OF:
            return None
        version = parts[2]
        if isinstance(obj, dict) and isinstance(obj.get("spec"), dict):
            taints_as_stored(obj["spec"], version, self.keeps_taints)
        if not self.schema_check:
            return None
        try:
            if self.validate is not None:
                self.validate(obj, RELEASE_OF[version])
            too_many = too_many_tainted(obj["spec"]) if isinstance(obj.get("spec"), dict) else None
            if too_many is not None:
                raise ValueError(too_many)
        except Exception as error:
            return (
                f"{obj.get('metadata', {}).get('name') if isinstance(obj, dict) else obj!r}: "
                f"{error}"
            )
        return None

    def _store(self, obj: dict[str, Any]) -> dict[str, Any]:
        stored = json.loads(json.dumps(obj))
        stored["metadata"]["resourceVersion"] = str(next(self._rv))
        stored["metadata"].setdefault("uid", str(uuid.uuid4()))
        kind = "MODIFIED" if stored["metadata"]["name"] in self.slices else "ADDED"
        self.slices[stored["metadata"]["name"]] = stored
        self._event(kind, stored)
        return stored
