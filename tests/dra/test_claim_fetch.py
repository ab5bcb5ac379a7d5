"""ApiClaimFetcher: the claim read NodePrepareResources makes, on the loop, with the API client's settings.

It must answer as the API server says (the dict, None for 404, RuntimeError naming the status or the
missing answer), send what the client's configuration says (host, BearerToken auth refreshed by the
client's hook, its User-Agent and cookie, a proxy unless no_proxy names the host) and never send a name
no claim can have.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator, Mapping
from typing import Any

import pytest
from kubernetes import client as k8s

from device_plugin.dra_helper.api.connection_settings import bypasses_proxy, proxy_for
from device_plugin.dra_helper.api.kube import api_client
from device_plugin.dra_helper.api.transport import ApiTransport
from device_plugin.dra_helper.claims.api_read import ApiClaimFetcher
from device_plugin.serving import event_loop
from testbed.api_standin import ApiStandin
from tests.dra.http_serving import QuietHandler, http_server

CLAIM = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": {"name": "c", "uid": "u1"}}


def fetch(fetcher: ApiClaimFetcher, namespace: str, name: str, times: int = 1) -> list[Mapping[str, Any] | None]:
    """`times` reads of one claim on a fresh loop, one after another; the session closed after."""

    async def reads() -> list[Mapping[str, Any] | None]:
        try:
            return [await fetcher.fetch_claim(namespace, name) for _ in range(times)]
        finally:
            await fetcher.transport.close()

    return asyncio.run(reads())


@pytest.fixture
def api() -> Iterator[ApiStandin]:
    standin = ApiStandin().up()
    yield standin
    standin.down()


def test_the_claim_none_when_gone_and_the_status_named_on_server_errors(api: ApiStandin) -> None:
    api.claims[("ns", "c")] = CLAIM
    fetcher = ApiClaimFetcher(api.transport(), lambda: "v1")
    assert fetch(fetcher, "ns", "c") == [CLAIM]
    assert fetch(fetcher, "ns", "gone") == [None]
    api.fail_next(1, 503)
    with pytest.raises(RuntimeError, match="HTTP 503"):
        fetch(fetcher, "ns", "c")
    assert fetch(fetcher, "ns", "c", times=3) == [CLAIM] * 3  # connections kept and reused


def test_a_name_no_claim_can_have_is_not_sent(api: ApiStandin) -> None:
    fetcher = ApiClaimFetcher(api.transport(), lambda: "v1")
    with pytest.raises(ValueError, match="not a valid object name"):
        fetch(fetcher, "ns", "../nodes/x")
    assert api.requests == []


def test_the_version_is_the_publishers_else_asked_of_the_server(api: ApiStandin) -> None:
    only_beta = ApiStandin(versions=("v1beta2",)).up()
    try:
        only_beta.claims[("ns", "c")] = CLAIM
        assert fetch(ApiClaimFetcher(ApiTransport(api_client(only_beta.host))), "ns", "c") == [CLAIM]
        assert ("GET", "/apis/resource.k8s.io/v1beta2/namespaces/ns/resourceclaims/c") in only_beta.requests
    finally:
        only_beta.down()


@pytest.mark.parametrize(
    ("fault", "message"),
    [("slow", r"no answer from the API server within 0.2 s"), ("down", r"ClientConnectorError")],
    ids=["no-answer-in-time", "connection-refused"],
)
def test_no_answer_is_a_runtime_error_saying_why(api: ApiStandin, fault: str, message: str) -> None:
    api.claims[("ns", "c")] = CLAIM
    fetcher = ApiClaimFetcher(api.transport(), lambda: "v1", timeout_s=0.2)
    if fault == "slow":
        api.claim_read_delay_s = 2.0
    else:
        api.down()
    with pytest.raises(RuntimeError, match=message):
        fetch(fetcher, "ns", "c")
    if fault == "down":
        api.up()


class _Recorder(QuietHandler):
    """Answers every GET with one claim and records its path (absolute when we came as to a proxy)."""

    seen: list[tuple[str, dict[str, str]]] = []

    def do_GET(self) -> None:
        self.seen.append((self.path, {k.lower(): v for k, v in self.headers.items()}))
        self.answer_json(CLAIM)


@pytest.fixture
def recorder() -> Iterator[tuple[str, list[tuple[str, dict[str, str]]]]]:
    seen: list[tuple[str, dict[str, str]]] = []
    with http_server(type("Handler", (_Recorder,), {"seen": seen})) as port:
        yield f"http://127.0.0.1:{port}", seen


def expired_client(host: str) -> k8s.ApiClient:
    """A client for `host` whose token has expired: its refresh hook, set by the test, gives the next one."""
    client = api_client(host)
    client.configuration.api_key = {"authorization": "Bearer expired"}
    return client


def test_the_request_carries_the_token_the_cookie_and_the_clients_user_agent(
    recorder: tuple[str, list[tuple[str, dict[str, str]]]],
) -> None:
    host, seen = recorder
    client = api_client(host)
    client.cookie = "session=1"
    client.configuration.api_key = {"authorization": "Bearer sekrit"}
    assert fetch(ApiClaimFetcher(ApiTransport(client), lambda: "v1"), "ns", "c") == [CLAIM]
    [(path, headers)] = seen
    assert path == "/apis/resource.k8s.io/v1/namespaces/ns/resourceclaims/c"
    assert headers["authorization"] == "Bearer sekrit"
    assert headers["accept"] == "application/json"
    assert headers["cookie"] == "session=1"
    assert headers["user-agent"] == client.default_headers["User-Agent"]


@pytest.mark.parametrize(
    ("refresh_s", "sent"),
    [(0.0, ["Bearer first", "Bearer second"]), (60.0, ["Bearer first", "Bearer first"])],
    ids=["asked-again-once-the-last-token-is-old", "reads-in-between-carry-the-last-token"],
)
def test_an_expiring_token_is_renewed_by_the_clients_hook(
    recorder: tuple[str, list[tuple[str, dict[str, str]]]], refresh_s: float, sent: list[str]
) -> None:
    host, seen = recorder
    client = expired_client(host)
    tokens = iter(["Bearer first", "Bearer second"])

    def refresh(configuration: Any) -> None:  # what load_incluster_config installs, for a rotated token file
        configuration.api_key = {"authorization": next(tokens)}

    client.configuration.refresh_api_key_hook = refresh
    fetch(ApiClaimFetcher(ApiTransport(client, auth_refresh_s=refresh_s), lambda: "v1"), "ns", "c", times=2)
    assert [headers["authorization"] for _, headers in seen] == sent


def test_a_slow_token_hook_runs_once_off_the_loop_for_every_read_waiting(
    recorder: tuple[str, list[tuple[str, dict[str, str]]]],
) -> None:
    """A kubeconfig exec plugin runs for seconds when its token expires: the loop serves every socket."""
    host, seen = recorder
    client = expired_client(host)
    calls: list[str] = []

    def refresh(configuration: Any) -> None:
        calls.append(threading.current_thread().name)
        time.sleep(0.5)
        configuration.api_key = {"authorization": "Bearer fresh"}

    client.configuration.refresh_api_key_hook = refresh
    fetcher = ApiClaimFetcher(ApiTransport(client), lambda: "v1")

    async def reads_and_ticks() -> tuple[int, list[Mapping[str, Any] | None]]:
        ticks = 0

        async def tick() -> None:
            nonlocal ticks
            while True:
                await asyncio.sleep(0.01)
                ticks += 1

        ticker = asyncio.ensure_future(tick())
        try:
            claims = await asyncio.gather(*(fetcher.fetch_claim("ns", "c") for _ in range(5)))
        finally:
            ticker.cancel()
            await fetcher.transport.close()
        return ticks, claims

    ticks, claims = asyncio.run(reads_and_ticks())
    assert claims == [CLAIM] * 5
    assert len(calls) == 1 and calls[0] != threading.main_thread().name
    assert ticks >= 10  # the loop went on while the hook slept (a blocked loop ticks once at most)
    assert [headers["authorization"] for _, headers in seen] == ["Bearer fresh"] * 5


def test_a_token_hook_that_hangs_fails_the_read_in_its_timeout(
    recorder: tuple[str, list[tuple[str, dict[str, str]]]],
) -> None:
    host, seen = recorder
    client = expired_client(host)
    hung = threading.Event()
    client.configuration.refresh_api_key_hook = lambda configuration: hung.wait(10.0)
    threading.Timer(1.0, hung.set).start()  # let the hook's thread go after the read gave up (asyncio.run joins it)
    with pytest.raises(RuntimeError, match=r"no token from the API client's refresh hook within 0.2 s"):
        fetch(ApiClaimFetcher(ApiTransport(client), lambda: "v1", timeout_s=0.2), "ns", "c")
    assert seen == []


def test_a_failing_token_hook_is_each_reads_error_and_is_asked_again(
    recorder: tuple[str, list[tuple[str, dict[str, str]]]],
) -> None:
    host, seen = recorder
    client = expired_client(host)
    outcomes = iter([OSError("exec plugin exited 1"), None])

    def refresh(configuration: Any) -> None:
        failure = next(outcomes)
        if failure is not None:
            raise failure
        configuration.api_key = {"authorization": "Bearer fresh"}

    client.configuration.refresh_api_key_hook = refresh
    fetcher = ApiClaimFetcher(ApiTransport(client), lambda: "v1")
    with pytest.raises(RuntimeError, match=r"cannot get a token for the API server: OSError: exec plugin exited 1"):
        fetch(fetcher, "ns", "c")
    assert seen == []  # nothing sent without a token
    assert fetch(fetcher, "ns", "c") == [CLAIM]
    assert [headers["authorization"] for _, headers in seen] == ["Bearer fresh"]


def test_a_configured_proxy_is_asked_with_the_absolute_url(
    recorder: tuple[str, list[tuple[str, dict[str, str]]]],
) -> None:
    proxy, seen = recorder
    client = api_client("http://api.invalid:6443")  # not resolvable: only the proxy can answer
    client.configuration.proxy = proxy
    assert fetch(ApiClaimFetcher(ApiTransport(client), lambda: "v1"), "ns", "c") == [CLAIM]
    [(path, _)] = seen
    assert path == "http://api.invalid:6443/apis/resource.k8s.io/v1/namespaces/ns/resourceclaims/c"


def test_a_socks_proxy_is_refused_by_name(api: ApiStandin) -> None:
    client = api_client(api.host)
    client.configuration.proxy = "socks5://127.0.0.1:1080"
    with pytest.raises(RuntimeError, match=r"socks5://127\.0\.0\.1:1080 is SOCKS"):
        fetch(ApiClaimFetcher(ApiTransport(client), lambda: "v1"), "ns", "c")


@pytest.mark.parametrize(
    ("url", "no_proxy", "bypassed"),
    [
        ("https://10.96.0.1:443", "", False),
        ("https://10.96.0.1:443", "*", True),
        ("https://10.96.0.1:443", "localhost, 10.96.0.0/12", True),
        ("https://10.96.0.1:443", "10.0.0.0/16", False),
        ("https://api.cluster.local:6443", ".cluster.local", True),
        ("https://api.cluster.local:6443", "cluster.local", True),
        ("https://api.cluster.local:6443", "api.cluster.local:6443", True),
        ("https://api.cluster.local:6443", "other.local,not-a-cidr/99", False),
        ("https://notcluster.local:6443", "cluster.local", False),
    ],
    ids=["none", "star", "cidr", "other-cidr", "dot-domain", "domain", "host-port", "others", "suffix-not-domain"],
)
def test_no_proxy_rules(url: str, no_proxy: str, bypassed: bool) -> None:
    assert bypasses_proxy(url, no_proxy) is bypassed
    client = api_client(url)
    client.configuration.proxy, client.configuration.no_proxy = "http://proxy:3128", no_proxy
    assert proxy_for(client.configuration) == ("" if bypassed else "http://proxy:3128")


def test_many_first_reads_before_the_version_is_known_do_not_starve_the_loops_threads(api: ApiStandin) -> None:
    """At a start with many checkpointed claims the clean-up reads them all at once, before the publisher has
    asked which resource.k8s.io version is served. Each read used to ask in a thread of the loop's pool that
    waited on the loop, which needed another pool thread for the token: with more reads than threads, every
    read stalled until the token's 5 s bound and the claims were kept "on doubt". Now one discovery, awaited."""
    for n in range(24):
        api.claims[("ns", f"c{n}")] = {**CLAIM, "metadata": {**CLAIM["metadata"], "name": f"c{n}"}}
    fetcher = ApiClaimFetcher(api.transport(), lambda: None)  # the version unknown yet

    async def all_at_once() -> list[Mapping[str, Any] | None]:
        return list(await asyncio.gather(*(fetcher.fetch_claim("ns", f"c{n}") for n in range(24))))

    started = time.monotonic()
    read = event_loop.run(all_at_once(), timeout_s=20.0)
    assert [r["metadata"]["name"] for r in read if r] == [f"c{n}" for n in range(24)]
    assert time.monotonic() - started < 4.0  # not the token's 5 s bound
    assert sum(1 for method, path in api.requests if path == "/apis/resource.k8s.io") == 1
