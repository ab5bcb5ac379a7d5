"""A claim read's answer is bounded: an API server (or a proxy on the way) that sends more than a claim
can be gets that read refused with the limit named, before the body is all in memory, whether the length
is said, only streamed (chunked), or hidden in a small gzip body.
"""

from __future__ import annotations

import gzip

import pytest

from device_plugin.dra_helper.api.kube import api_client
from device_plugin.dra_helper.api.transport import ApiTransport
from device_plugin.dra_helper.claims.api_read import MAX_ANSWER_BYTES, ApiClaimFetcher
from tests.dra.http_serving import QuietHandler, http_server
from tests.dra.test_claim_fetch import fetch


class _Oversized(QuietHandler):
    """Answers every GET with a body past the fetcher's limit, in the way `how` names."""

    how = "length"

    def do_GET(self) -> None:
        big = b"[" + b"0," * (MAX_ANSWER_BYTES // 2 + 1) + b"0]"
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        if self.how == "gzip":  # 20 KiB on the wire, over 4 MiB once decompressed
            body = gzip.compress(big)
            self.send_header("Content-Encoding", "gzip")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
        elif self.how == "chunked":  # no length said: only the bytes read can tell
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            for start in range(0, len(big), 65536):
                chunk = big[start : start + 65536]
                self.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
            self.wfile.write(b"0\r\n\r\n")
        else:
            self.send_header("Content-Length", str(len(big)))
            self.end_headers()
            self.wfile.write(big)


@pytest.mark.parametrize("how", ["length", "chunked", "gzip"], ids=["said-length", "chunked", "gzip-bomb"])
def test_an_answer_past_the_size_limit_is_refused_not_held(how: str) -> None:
    with http_server(type("Handler", (_Oversized,), {"how": how})) as port:
        fetcher = ApiClaimFetcher(ApiTransport(api_client(f"http://127.0.0.1:{port}")), lambda: "v1")
        with pytest.raises(RuntimeError, match=r"the API server's answer passes 4 MiB: not a ResourceClaim"):
            fetch(fetcher, "ns", "c")
