"""The one transport to the API server: every request (the publisher's from its thread, the watch's stream,
a claim read on the loop) carries the client's settings, and an answer other than 2xx is an ApiError with its
status and the Status message the server gave; no answer is ApiUnreachable (transient).
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Iterator

import pytest

from device_plugin.dra_helper.api.api_errors import ApiError, ApiUnreachable, is_transient
from device_plugin.dra_helper.api.kube import api_client
from device_plugin.dra_helper.api.transport import ApiTransport
from device_plugin.serving import event_loop
from tests.dra.http_serving import QuietHandler, http_server

SEEN: list[tuple[str, str, dict[str, str], bytes]] = []  # (method, path, headers, body) of every request


class _Recording(QuietHandler):
    """Records each request; answers /status/<code> with that code and a Status, /stream with two lines."""

    def _any(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        SEEN.append((self.command, self.path, {k.lower(): v for k, v in self.headers.items()}, self.rfile.read(length)))
        if self.path.startswith("/status/"):
            code = int(self.path.split("?")[0].rsplit("/", 1)[1])
            body = json.dumps({"kind": "Status", "message": f"said with {code}", "code": code}).encode()
            self.send_response(code)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
        elif self.path.startswith("/stream"):
            self.send_response(200)
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            for line in (b'{"type": "ADDED"}\n', b'{"type": "DELETED"}\n'):
                self.wfile.write(b"%x\r\n%s\r\n" % (len(line), line))
            self.wfile.write(b"0\r\n\r\n")
        else:
            self.answer_json({"ok": True})

    do_GET = do_POST = do_PUT = do_DELETE = _any


@pytest.fixture
def transport() -> Iterator[ApiTransport]:
    SEEN.clear()
    with http_server(_Recording) as port:
        client = api_client(f"http://127.0.0.1:{port}")
        client.configuration.api_key = {"authorization": "Bearer sekrit"}
        client.cookie = "session=1"
        made = ApiTransport(client)
        yield made
        made.shut()


def test_a_call_from_a_thread_carries_the_clients_settings_and_a_json_body(transport: ApiTransport) -> None:
    answers = []
    thread = threading.Thread(target=lambda: answers.append(transport.call("PUT", "/x", body={"a": 1})))
    thread.start()
    thread.join(10.0)
    assert [a.json() for a in answers] == [{"ok": True}]
    [(method, path, headers, body)] = SEEN
    assert (method, path, json.loads(body)) == ("PUT", "/x", {"a": 1})
    assert headers["authorization"] == "Bearer sekrit" and headers["cookie"] == "session=1"
    assert headers["content-type"] == "application/json" and headers["accept"] == "application/json"
    assert headers["user-agent"].startswith("OpenAPI-Generator/")  # the client's own User-Agent


@pytest.mark.parametrize(
    ("code", "transient"), [(409, False), (422, False), (429, True), (503, True)], ids=["409", "422", "429", "503"]
)
def test_an_answer_other_than_2xx_is_an_api_error_with_the_servers_message(
    transport: ApiTransport, code: int, transient: bool
) -> None:
    answer = transport.call("GET", f"/status/{code}")
    with pytest.raises(ApiError) as raised:
        answer.json("reading something")
    error = raised.value
    assert error.status == code and error.message() == f"said with {code}" and is_transient(error) is transient
    assert f"HTTP {code}" in str(error) and "(reading something): said with" in str(error)


def test_a_stream_is_read_as_it_arrives_and_a_refused_one_is_an_api_error(transport: ApiTransport) -> None:
    async def read(path: str) -> bytes:
        async with transport.stream(path, {"watch": "true"}, read_timeout_s=5.0) as body:
            return b"".join([chunk async for chunk in body.iter_any()])

    assert event_loop.run(read("/stream"), timeout_s=10.0).splitlines() == [
        b'{"type": "ADDED"}',
        b'{"type": "DELETED"}',
    ]
    with pytest.raises(ApiError) as raised:
        event_loop.run(read("/status/403"), timeout_s=10.0)
    assert raised.value.status == 403
    assert [(m, p) for m, p, _, _ in SEEN] == [("GET", "/stream?watch=true"), ("GET", "/status/403?watch=true")]
    assert all(headers["authorization"] == "Bearer sekrit" for _, _, headers, _ in SEEN)


def test_nobody_answering_is_api_unreachable_and_transient() -> None:
    with http_server(QuietHandler) as port:
        pass  # free again: nothing listens there
    transport = ApiTransport(api_client(f"http://127.0.0.1:{port}"))
    with pytest.raises(ApiUnreachable) as raised:
        asyncio.run(transport.send("GET", "/x", timeout_s=2.0))
    assert is_transient(raised.value)


def test_a_socks_proxy_is_refused_for_every_request_naming_it() -> None:
    client = api_client("http://127.0.0.1:1")
    client.configuration.proxy = "socks5://127.0.0.1:1080"
    with pytest.raises(ApiUnreachable, match=r"socks5://127\.0\.0\.1:1080 is SOCKS"):
        ApiTransport(client).call("GET", "/apis/resource.k8s.io")
