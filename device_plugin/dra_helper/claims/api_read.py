"""The claim read NodePrepareResources makes: one GET of a ResourceClaim from the API server.

Boundary: the read only (claims/prepare.py decides what it means), through
dra_helper/api/transport.py, awaited on the serving loop. In the resource.k8s.io version the
publisher discovered (asked of the server when it has none yet); at most READS_IN_FLIGHT sent
together (further ones wait their turn before their own timeout starts); an answer read up to
MAX_ANSWER_BYTES (decompressed), no further; 404 is "no such claim", any other failure a
RuntimeError naming it (a 2xx that is no object included: a proxy's page is no word on the claim).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from typing import Any

from device_plugin.dra_helper.api.api_errors import AnswerTooBig
from device_plugin.dra_helper.api.kube import newest_resource_version_on_loop
from device_plugin.dra_helper.api.slices import GROUP
from device_plugin.dra_helper.api.transport import REQUEST_TIMEOUT_S, ApiTransport
from device_plugin.dra_helper.claims.claim import check_claim_name

READS_IN_FLIGHT = 16  # claim reads sent at once, all calls together
# a claim is at most ~1.5 MiB (etcd's object limit); past this, no claim
MAX_ANSWER_BYTES = 4 * 1024 * 1024
# names checked first
_CLAIM_PATH = "/apis/{group}/{version}/namespaces/{namespace}/resourceclaims/{name}"


class ApiClaimFetcher:
    """The Preparer's ClaimFetcher in production."""

    def __init__(
        self,
        transport: ApiTransport,
        discovered: Callable[[], str | None] = lambda: None,
        *,
        timeout_s: float = REQUEST_TIMEOUT_S,
    ) -> None:
        """`discovered()`: the resource.k8s.io version the publisher found the server serving, or
        None."""
        self.transport = transport  # shared (the plugin's); whoever made it closes it
        self._discovered = discovered
        self._version: str | None = None
        self._timeout_s = timeout_s
        self._turns: asyncio.Semaphore | None = None
        self._discovery: asyncio.Lock | None = None
        self._discovery_loop: asyncio.AbstractEventLoop | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    async def fetch_claim(self, namespace: str, name: str) -> Mapping[str, Any] | None:
        """The claim, or None when it does not exist. ValueError: a name no claim can have (not
        sent); RuntimeError: no answer, or an answer other than the claim or 404 (the status
        named)."""
        check_claim_name(namespace, name)
        # the publisher discovers it at start; until then, ask (once for all reads)
        if self._version is None:
            async with self._discovering():
                if self._version is None:
                    self._version = self._discovered() or await newest_resource_version_on_loop(
                        self.transport
                    )
        path = _CLAIM_PATH.format(
            group=GROUP, version=self._version, namespace=namespace, name=name
        )
        async with self._opened():
            try:
                answer = await self.transport.send(
                    "GET", path, timeout_s=self._timeout_s, limit_bytes=MAX_ANSWER_BYTES
                )
            except AnswerTooBig as error:
                raise RuntimeError(f"{error}: not a ResourceClaim") from None
        if answer.status == 404:
            return None
        obj = answer.json(f"reading ResourceClaim {namespace}/{name}")
        if not isinstance(obj, dict):  # a proxy's or a broken server's answer: no word on the claim
            raise RuntimeError(
                f"the API server answered ResourceClaim {namespace}/{name} with no object"
            )
        return obj

    def _discovering(self) -> asyncio.Lock:
        loop = asyncio.get_running_loop()
        if self._discovery is None or self._discovery_loop is not loop:
            self._discovery, self._discovery_loop = asyncio.Lock(), loop
        return self._discovery

    def _opened(self) -> asyncio.Semaphore:
        loop = asyncio.get_running_loop()
        if self._turns is None or self._loop is not loop:
            self._turns, self._loop = asyncio.Semaphore(READS_IN_FLIGHT), loop
        return self._turns
