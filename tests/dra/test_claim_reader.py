"""ApiClaimReader: the claim read NodePrepareResources makes, on the client's direct path and its generated one.

Both paths must answer alike (the dict, None for 404, RuntimeError naming the HTTP status otherwise) and send
what the client's configuration says (host, BearerToken auth, its User-Agent), as the generated method does.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from kubernetes.client.exceptions import ApiException

from device_plugin.dra.kube import ApiClaimReader, api_client
from tests.dra.api_standin import ApiStandin


def reader_for(host: str, path: str, cookie: str | None = None, **auth: str) -> ApiClaimReader:
    client = api_client(host)
    client.cookie = cookie
    if auth:
        client.configuration.api_key = dict(auth)
    return ApiClaimReader(client, "v1", direct=path == "direct")


@pytest.fixture
def api() -> Iterator[ApiStandin]:
    standin = ApiStandin().up()
    yield standin
    standin.down()


@pytest.mark.parametrize("path", ["direct", "generated"])
def test_both_paths_answer_the_claim_none_when_gone_and_raise_on_server_errors(api: ApiStandin, path: str) -> None:
    claim = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": {"name": "c", "uid": "u1"}}
    api.claims[("ns", "c")] = claim
    reader = reader_for(api.host, path)
    assert reader.get_claim("ns", "c") == claim
    assert reader.get_claim("ns", "gone") is None
    api.fail_next(1, 503)
    with pytest.raises(RuntimeError, match="HTTP 503"):
        reader.get_claim("ns", "c")
    assert reader.get_claim("ns", "c") == claim  # the failed answer's connection was not left half-read


@pytest.mark.parametrize("path", ["direct", "generated"])
def test_a_name_no_claim_can_have_is_not_sent(api: ApiStandin, path: str) -> None:
    with pytest.raises(ValueError, match="not a valid object name"):
        reader_for(api.host, path).get_claim("ns", "../nodes/x")


@pytest.mark.parametrize("path", ["direct", "generated"])
def test_the_clients_own_failure_is_worded_alike_on_both_paths(
    api: ApiStandin, path: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    client = api_client(api.host)
    reader = ApiClaimReader(client, "v1", direct=path == "direct")

    def tls_failure(*args: object, **kwargs: object) -> None:
        raise ApiException(status=0, reason="SSLError: certificate verify failed")

    monkeypatch.setattr(client.rest_client, "request", tls_failure)
    with pytest.raises(RuntimeError, match=r"^HTTP 0 SSLError: certificate verify failed$"):
        reader.get_claim("ns", "c")


class _Recorder(BaseHTTPRequestHandler):
    seen: list[tuple[str, dict[str, str]]] = []
    body = b'{"metadata": {"name": "c", "uid": "u1"}}'

    def do_GET(self) -> None:
        self.seen.append((self.path, {k.lower(): v for k, v in self.headers.items()}))
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(self.body)))
        self.end_headers()
        self.wfile.write(self.body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def recorder() -> Iterator[tuple[str, list[tuple[str, dict[str, str]]]]]:
    seen: list[tuple[str, dict[str, str]]] = []
    handler = type("Handler", (_Recorder,), {"seen": seen})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}", seen
    server.shutdown()
    server.server_close()
    thread.join()


@pytest.mark.parametrize("path", ["direct", "generated"])
def test_the_request_carries_the_configured_token_and_the_clients_headers(
    recorder: tuple[str, list[tuple[str, dict[str, str]]]], path: str
) -> None:
    host, seen = recorder
    reader = reader_for(host, path, cookie="session=1", authorization="Bearer sekrit")
    assert reader.get_claim("ns", "c") == json.loads(_Recorder.body)
    [(url, headers)] = seen
    assert url == "/apis/resource.k8s.io/v1/namespaces/ns/resourceclaims/c"
    assert headers["authorization"] == "Bearer sekrit"
    assert headers["accept"] == "application/json"
    assert headers["cookie"] == "session=1"
    assert headers["user-agent"].startswith("OpenAPI-Generator/")


def test_the_direct_path_is_taken_with_this_client(api: ApiStandin) -> None:
    """The installed client has the direct calls: the figures in docs/benchmarks.md are for that path."""
    assert ApiClaimReader(api_client(api.host), "v1")._direct
