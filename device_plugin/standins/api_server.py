"""A Kubernetes API server stand-in: the few endpoints the DRA driver uses, with real semantics.

HTTP on 127.0.0.1 (ephemeral port, one thread per request, bounded by the test's lifetime); the real
`kubernetes` client talks to it. Served:
- GET /apis/resource.k8s.io (the APIGroup: which versions are served, configurable);
- GET /api/v1/nodes/{name};
- /apis/resource.k8s.io/{v}/resourceslices: list (fieldSelector a=b,c=d and labelSelector equality),
  POST (409 AlreadyExists), and per name GET / PUT (resourceVersion must match, else 409 Conflict;
  404 when missing) / DELETE (404 when missing);
- GET /apis/resource.k8s.io/{v}/namespaces/{ns}/resourceclaims/{name}, and the list of all of them.
Every object we are sent is checked by the `validate` the caller passes (the tests pass
kubernetes-validate's strict check: testbed/schema_check.py) against the Kubernetes release that
introduced its version; an invalid one is refused with 422 and recorded in `invalid`. Without a
validator only the rules below apply. Lists carry the collection's resourceVersion; `watch=true`
streams ADDED/MODIFIED/DELETED events after a resourceVersion (recorded in `requests` as "WATCH"). A
write without a JSON Content-Type is refused with 415, as the real API server does.
Faults: `down()` / `up()` close and reopen the listening socket on the same port (connection
refused meanwhile); `fail_next(n, status)` answers the next n requests with that status;
`race_next_put(name)` changes a slice just before the client's next PUT of it (409 Conflict);
`ignore_field_selector` answers every list with all slices (a server or proxy that drops the
selector); `wipe_node(node)` deletes every slice of a node, as the kubelet does at its start;
`delay_s` holds every answer that long, `answer_delay_s` only a write's answer, after it is stored.
`schema_check = False` skips every check of a write (a benchmark timing the driver: a real API
server validates out of our process, in far less than the ~20 ms jsonschema takes here).
Writes that misbehave on purpose (`writes_lost`, `refuses_taints`) and `dryRun=All`: api_writes.py.
Device taints (KEP-5055) as the API server treats them: kept when `keeps_taints` (DRADeviceTaints
on, the default from 1.36), with `timeAdded` set where the writer left it out; otherwise dropped
from every device before the object is validated and stored, as a server with the gate off does (and
v1beta1, whose 1.32 schema has no taints, always drops them). A slice whose devices carry taints
holds at most 64 devices (the API server's own validation, which the OpenAPI schema does not
express): more is refused with 422.
"""

from __future__ import annotations

import itertools
import json
import threading
import time
import uuid
from collections.abc import Callable
from http.server import ThreadingHTTPServer
from typing import Any

from device_plugin.standins.api_http import Server, handler_for
from device_plugin.standins.api_objects import GROUP, api_group, field_of, matches
from device_plugin.standins.api_objects import status_body as _status
from device_plugin.standins.api_writes import SliceWrites

# Raises when `obj` is not valid for the Kubernetes release (e.g. "1.34"); the message says why.
Validator = Callable[[dict[str, Any], str], None]


class ApiStandin(SliceWrites):
    def __init__(
        self,
        versions: tuple[str, ...] = ("v1", "v1beta2", "v1beta1"),
        validate: Validator | None = None,
    ) -> None:
        self.versions = versions
        self.validate = validate
        self.nodes: dict[str, dict[str, Any]] = {}
        self.slices: dict[str, dict[str, Any]] = {}
        self.claims: dict[tuple[str, str], dict[str, Any]] = {}
        self.invalid: list[str] = []
        self.requests: list[tuple[str, str]] = []  # (method, path)
        # (method, path, status) of every request handled
        self.answered: list[tuple[str, str, int]] = []
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)
        # (resourceVersion, type, object) in order
        self._events: list[tuple[int, str, dict[str, Any]]] = []
        self.ignore_field_selector = False
        self.delay_s = 0.0  # every answer this late (a slow API server)
        self.watch_ends_at_once = False
        self.watch_status = 200  # any other: every watch is answered with it
        self.keeps_taints = True  # False: device taints are dropped (DRADeviceTaints off)
        # False: writes skip the strict schema check (~20 ms of Python a slice; benchmarks)
        self.schema_check = True
        # a write is stored at once but answered this late (after its watch event)
        self.answer_delay_s = 0.0
        # a slow API server: each ResourceClaim GET waits this long first
        self.claim_read_delay_s = 0.0
        self._rv = itertools.count(1)
        self._faults: list[int] = []
        self._races: set[str] = set()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self.port = 0

    @property
    def host(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    # ---- lifecycle and faults -------------------------------------------------------------------

    def up(self) -> ApiStandin:
        server = Server(("127.0.0.1", self.port), handler_for(self))
        self.port = server.server_address[1]
        self._server = server
        self._thread = threading.Thread(
            target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self._thread.start()
        return self

    def down(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def fail_next(self, count: int, status: int = 500) -> None:
        with self._lock:
            self._faults.extend([status] * count)

    def add_node(self, name: str, container_runtime: str = "containerd://2.1.4") -> str:
        """A Node as a kubelet registers it: its UID, and the runtime it reports (a CDI-capable one
        unless said)."""
        uid = str(uuid.uuid4())
        self.nodes[name] = {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": name, "uid": uid},
            "status": {"nodeInfo": {"containerRuntimeVersion": container_runtime}},
        }
        return uid

    def race_next_put(self, name: str) -> None:
        """Another writer changes slice `name` just before our next PUT of it arrives: that PUT
        conflicts."""
        with self._lock:
            self._races.add(name)

    def _concurrent_write(self, name: str) -> None:
        obj = self.slices[name]
        obj["metadata"].setdefault("labels", {})["touched-by"] = "someone-else"
        obj["metadata"]["resourceVersion"] = str(next(self._rv))
        self._event("MODIFIED", obj)

    def add_slice(self, obj: dict[str, Any]) -> None:
        """Someone else's slice (another node's, another driver's), stored as given."""
        with self._lock:
            self._store(obj)

    def wipe_node(self, node: str) -> int:
        """Delete every slice of `node`, whatever its driver (the kubelet at start-up). Returns how
        many."""
        with self._lock:
            names = [n for n, o in self.slices.items() if field_of(o, "spec.nodeName") == node]
            for name in names:
                self._remove(name)
            return len(names)

    def _event(self, kind: str, obj: dict[str, Any]) -> None:
        self._events.append(
            (int(obj["metadata"]["resourceVersion"]), kind, json.loads(json.dumps(obj)))
        )
        self._changed.notify_all()

    def _remove(self, name: str) -> None:
        gone = self.slices.pop(name)
        gone["metadata"]["resourceVersion"] = str(next(self._rv))
        self._event("DELETED", gone)

    def watch(self, query: dict[str, str], write: Any, serving: Any) -> None:
        """Stream the slice events after query's resourceVersion that match its selectors, until
        timeoutSeconds pass, the server goes down, or the client goes away (`write` raises
        OSError)."""
        if self.watch_ends_at_once:  # a proxy that closes every stream at once
            return
        since = int(query.get("resourceVersion") or 0)
        fields = "" if self.ignore_field_selector else query.get("fieldSelector", "")
        labels = query.get("labelSelector", "")
        deadline = time.monotonic() + float(query.get("timeoutSeconds") or 1800)
        while serving() and time.monotonic() < deadline:
            with self._lock:
                events = [e for e in self._events if e[0] > since and matches(e[2], fields, labels)]
                if not events:
                    self._changed.wait(0.05)
                    continue
            for rv, kind, obj in events:
                write((json.dumps({"type": kind, "object": obj}) + "\n").encode())
                since = rv

    def pool(self, driver: str, node: str) -> list[dict[str, Any]]:
        """Our slices as the scheduler sees them, by name."""
        with self._lock:
            return [
                json.loads(json.dumps(o))
                for _, o in sorted(self.slices.items())
                if matches(o, f"spec.driver={driver},spec.nodeName={node}", "")
            ]

    def snapshots(self) -> list[dict[str, Any]]:
        """Every slice as stored by each write so far (ADDED and MODIFIED events), oldest first."""
        with self._lock:
            return [json.loads(json.dumps(o)) for _, kind, o in self._events if kind != "DELETED"]

    @property
    def changes(self) -> int:
        """How many slice changes (adds, updates, deletes) the stand-in has stored so far."""
        with self._lock:
            return len(self._events)

    def wait_for_change(self, seen: int, timeout_s: float) -> int:
        """Until more than `seen` changes are stored (or `timeout_s` passes); the count then. Lets a
        benchmark look at the pool once per change instead of polling it from the driver's own
        process."""
        with self._changed:
            self._changed.wait_for(lambda: len(self._events) > seen, timeout=timeout_s)
            return len(self._events)

    # ---- request handling (called by the handler, one thread per request)
    # -------------------------

    def serving(self, server: object) -> bool:
        """Whether `server` is the one listening now (not one that went down with a connection kept
        alive)."""
        return server is self._server

    def record(self, method: str, path: str) -> None:
        with self._lock:
            self.requests.append((method, path))

    def handle(
        self,
        method: str,
        path: str,
        query: dict[str, str],
        body: Any,
        content_type: str = "application/json",
    ) -> tuple[int, Any]:
        status, answer = self._handle(method, path, query, body, content_type)
        with self._lock:
            self.answered.append((method, path, status))
        return status, answer

    def _handle(
        self, method: str, path: str, query: dict[str, str], body: Any, content_type: str
    ) -> tuple[int, Any]:
        # Checked before the lock: a strict schema check takes ~20 ms in Python, and a real API
        # server does not hold up other requests (a claim read by NodePrepareResources) while it
        # validates a write.
        refused = self._refusal(body) if method in ("POST", "PUT") else None
        schema_error = (
            self._schema_error(body, path)
            if method in ("POST", "PUT") and refused is None
            else None
        )
        with self._lock:
            self.requests.append((method, path))
            if self._faults:
                status = self._faults.pop(0)
                return status, _status(status, "injected fault")
            if refused is not None:
                return refused
            if body is not None and content_type.split(";")[0].strip() != "application/json":
                return 415, _status(
                    415, f"the body of the request was in an unknown format: {content_type!r}"
                )
            parts = [p for p in path.split("/") if p]
            if method == "GET" and parts == ["apis", GROUP]:
                return 200, api_group(self.versions)
            if method == "GET" and parts[:3] == ["api", "v1", "nodes"] and len(parts) == 4:
                node = self.nodes.get(parts[3])
                return (200, node) if node else (404, _status(404, f'nodes "{parts[3]}" not found'))
            if parts[:2] != ["apis", GROUP] or len(parts) < 4 or parts[2] not in self.versions:
                return 404, _status(404, f"no such path {path}")
            version, rest = parts[2], parts[3:]
            if rest == ["resourceclaims"] and method == "GET":  # every namespace's, as a List
                items = [self.claims[key] for key in sorted(self.claims)]
                return 200, {
                    "apiVersion": f"{GROUP}/{version}",
                    "kind": "ResourceClaimList",
                    "items": items,
                }
            if (
                rest[0] == "namespaces"
                and len(rest) == 4
                and rest[2] == "resourceclaims"
                and method == "GET"
            ):
                claim = self.claims.get((rest[1], rest[3]))
                return (
                    (200, claim)
                    if claim
                    else (404, _status(404, f'resourceclaims "{rest[3]}" not found'))
                )
            if rest[0] != "resourceslices":
                return 404, _status(404, f"no such path {path}")
            return self._slices(
                method, version, rest[1] if len(rest) > 1 else None, query, body, schema_error
            )
