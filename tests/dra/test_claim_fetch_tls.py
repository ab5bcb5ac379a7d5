"""ApiClaimFetcher over TLS, as in a cluster: the CA, the server name and verify_ssl of the client's
configuration decide whom it trusts (certificates made by openssl for each test)."""

from __future__ import annotations

import shutil
import ssl
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from device_plugin.dra_helper.api.kube import api_client
from device_plugin.dra_helper.api.transport import ApiTransport
from device_plugin.dra_helper.claims.api_read import ApiClaimFetcher
from tests.dra.http_serving import http_server
from tests.dra.test_claim_fetch import CLAIM, _Recorder, fetch

pytestmark = pytest.mark.skipif(shutil.which("openssl") is None, reason="openssl makes the test certificates")


def _openssl(*args: str) -> None:
    subprocess.run(["openssl", *args], check=True, capture_output=True)


@pytest.fixture
def tls_api(tmp_path: Path) -> Iterator[tuple[int, Path]]:
    """A server with a certificate for the name api.test only, signed by a CA of its own; (port, CA file)."""
    ca, key, csr, cert = (tmp_path / n for n in ("ca.pem", "key.pem", "server.csr", "server.pem"))
    ca_key = tmp_path / "ca-key.pem"
    _openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(ca_key), "-out", str(ca),
             "-days", "2", "-subj", "/CN=test-ca")  # fmt: skip
    _openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key), "-out", str(csr), "-subj", "/CN=api.test")
    extensions = tmp_path / "san.ext"
    extensions.write_text("subjectAltName=DNS:api.test\n")
    _openssl("x509", "-req", "-in", str(csr), "-CA", str(ca), "-CAkey", str(ca_key), "-CAcreateserial",
             "-out", str(cert), "-days", "2", "-extfile", str(extensions))  # fmt: skip
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(str(cert), str(key))
    with http_server(
        type("Handler", (_Recorder,), {"seen": []}), lambda s: context.wrap_socket(s, server_side=True)
    ) as port:
        yield port, ca


@pytest.mark.parametrize(
    ("ca_file", "server_name", "verify", "answered"),
    [
        (True, "api.test", True, True),
        (False, "api.test", True, False),
        (True, None, True, False),
        (False, None, False, True),
    ],
    ids=["our-ca-and-name", "unknown-ca", "name-mismatch", "verify-off"],
)
def test_only_the_configured_ca_and_name_are_trusted(
    tls_api: tuple[int, Path], ca_file: bool, server_name: str | None, verify: bool, answered: bool
) -> None:
    port, ca = tls_api
    client = api_client(f"https://127.0.0.1:{port}")
    client.configuration.ssl_ca_cert = str(ca) if ca_file else None
    client.configuration.tls_server_name = server_name
    client.configuration.verify_ssl = verify
    fetcher = ApiClaimFetcher(ApiTransport(client), lambda: "v1")
    if answered:
        assert fetch(fetcher, "ns", "c") == [CLAIM]
    else:
        with pytest.raises(RuntimeError, match=r"[Cc]ertificate"):
            fetch(fetcher, "ns", "c")


def test_a_ca_file_that_cannot_be_read_is_each_reads_error_not_a_crash(tmp_path: Path) -> None:
    client = api_client("https://127.0.0.1:1")
    client.configuration.ssl_ca_cert = str(tmp_path / "missing-ca.pem")
    fetcher = ApiClaimFetcher(ApiTransport(client), lambda: "v1")  # made at start: nothing is read yet
    with pytest.raises(RuntimeError, match="cannot set up TLS to the API server"):
        fetch(fetcher, "ns", "c")
