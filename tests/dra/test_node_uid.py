"""The Node's UID (the owner of our ResourceSlices): one bounded GET through the transport, with the client's settings.

It must carry what the client's configuration says (token, User-Agent), answer the UID, fail the way the
publisher's retry expects (an ApiError with the status, ApiUnreachable when nobody answers), refuse a
Node without a UID or an answer past its size bound, and never import the client's CoreV1Api, whose models
cost a third of a second of every start before the first slice.
"""

from __future__ import annotations

import gzip
import subprocess
import sys
from collections.abc import Iterator

import pytest

from device_plugin.core.errors import PluginError
from device_plugin.dra_helper.api.api_errors import ApiError, is_transient
from device_plugin.dra_helper.api.kube import MAX_NODE_BYTES, api_client, read_node
from device_plugin.dra_helper.api.transport import ApiTransport
from testbed.api_standin import ApiStandin
from tests.dra.http_serving import QuietHandler, http_server


@pytest.fixture
def api() -> Iterator[ApiStandin]:
    standin = ApiStandin().up()
    standin.add_node("node-a")
    yield standin
    standin.down()


def test_the_uid_is_read_with_the_clients_token_and_user_agent() -> None:
    seen: list[tuple[str, dict[str, str]]] = []

    class Node(QuietHandler):
        def do_GET(self) -> None:
            seen.append((self.path, {k.lower(): v for k, v in self.headers.items()}))
            self.answer_json({"kind": "Node", "metadata": {"name": "node-a", "uid": "u-1"}})

    with http_server(Node) as port:
        client = api_client(f"http://127.0.0.1:{port}")
        client.configuration.api_key = {"authorization": "Bearer sekrit"}
        assert read_node(ApiTransport(client), "node-a").uid == "u-1"
    [(path, headers)] = seen
    assert path == "/api/v1/nodes/node-a"
    assert headers["authorization"] == "Bearer sekrit"
    assert headers["user-agent"] == client.default_headers["User-Agent"]


def test_the_stand_ins_node(api: ApiStandin) -> None:
    assert read_node(api.transport(), "node-a").uid == api.nodes["node-a"]["metadata"]["uid"]


@pytest.mark.parametrize(
    ("status", "transient"), [(404, False), (403, False), (503, True), (429, True)], ids=["404", "403", "503", "429"]
)
def test_an_answer_other_than_the_node_is_an_api_exception_with_its_status(
    api: ApiStandin, status: int, transient: bool
) -> None:
    if status != 404:
        api.fail_next(1, status)
    with pytest.raises(ApiError) as raised:
        read_node(api.transport(), "node-a" if status != 404 else "node-b")
    assert raised.value.status == status and is_transient(raised.value) is transient
    assert "reading node node-" in str(raised.value)


def test_nobody_answering_is_transient() -> None:
    with http_server(QuietHandler) as port:
        pass  # the port is free again: nothing listens there
    with pytest.raises(Exception) as raised:
        read_node(ApiTransport(api_client(f"http://127.0.0.1:{port}")), "node-a")
    assert is_transient(raised.value)


class _Odd(QuietHandler):
    """Answers with what `body` names: a Node without a UID, a body past the size bound (chunked, no length
    said), or a gzip bomb (small on the wire, past the bound once decompressed)."""

    body = "no-uid"

    def do_GET(self) -> None:
        if self.body == "no-uid":
            self.answer_json({"kind": "Node", "metadata": {"name": "node-a"}})
            return
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        if self.body == "gzip-bomb":
            data = gzip.compress(b" " * (MAX_NODE_BYTES + 1024))
            self.send_header("Content-Encoding", "gzip")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
            return
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        chunk = b" " * 65536
        for _ in range(MAX_NODE_BYTES // len(chunk) + 2):
            self.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
        self.wfile.write(b"0\r\n\r\n")


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ("no-uid", r"node 'node-a' has no metadata.uid"),
        ("too-big", r"node 'node-a': the API server's answer passes 16 MiB: not a Node we read"),
        ("gzip-bomb", r"node 'node-a': the API server's answer passes 16 MiB: not a Node we read"),
    ],
    ids=["no-uid", "past-16-mib-chunked", "gzip-bomb"],
)
def test_a_node_without_a_uid_or_past_the_bound_is_refused(body: str, message: str) -> None:
    with http_server(type("Handler", (_Odd,), {"body": body})) as port, pytest.raises(PluginError, match=message):
        read_node(ApiTransport(api_client(f"http://127.0.0.1:{port}")), "node-a")


def test_the_read_does_not_import_the_clients_core_v1_api(api: ApiStandin) -> None:
    script = (
        "import sys\n"
        "from device_plugin.dra.front_end import DraFrontEnd\n"
        "from device_plugin.dra_helper.api.kube import api_client, read_node\n"
        "from device_plugin.dra_helper.api.transport import ApiTransport\n"
        "read_node(ApiTransport(api_client(sys.argv[1])), 'node-a')\n"
        "print(sorted(m for m in sys.modules if m.endswith('core_v1_api')))\n"
    )
    done = subprocess.run([sys.executable, "-c", script, api.host], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"
