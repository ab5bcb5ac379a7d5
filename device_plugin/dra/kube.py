"""The API server through the official `kubernetes` client: connection, version discovery, claim reads.

Boundary: the only place (with `publisher`) that talks to the API server. ResourceSlices and
ResourceClaims go through the client's generic object calls (CustomObjectsApi works for any
group/version path, built-in ones included), so the objects stay plain dicts in exactly the shape
`slices` builds and the server returns, for whichever resource.k8s.io version the server offers.
Nodes are read with CoreV1Api (we only need the UID, for the slices' owner reference).
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from typing import Any

import urllib3
from kubernetes import client as k8s
from kubernetes import config as k8s_config
from kubernetes.client.exceptions import ApiException

from device_plugin.core.errors import PluginError
from device_plugin.core.short_text import short
from device_plugin.dra.slices import API_VERSIONS, GROUP

REQUEST_TIMEOUT_S = 5.0
MAX_NAMESPACE_CHARS, MAX_NAME_CHARS = 63, 253
_DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
_DNS_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
KEPT_CONNECTIONS = 24


class UnsupportedApiError(PluginError):
    """The API server serves no resource.k8s.io version we can publish (Kubernetes older than 1.32)."""


def api_client(host: str | None = None) -> k8s.ApiClient:
    """A client for `host` (tests, plain http), else $KUBECONFIG, else the pod's service account."""
    if host is not None:
        configuration = k8s.Configuration(host=host)
    elif os.environ.get("KUBECONFIG"):
        configuration = k8s.Configuration()
        k8s_config.load_kube_config(config_file=os.environ["KUBECONFIG"], client_configuration=configuration)
    else:
        configuration = k8s.Configuration()
        k8s_config.load_incluster_config(client_configuration=configuration)
    configuration.retries = 0  # our loops retry with backoff; urllib3's instant retries only add delay
    # Kept connections for every claim read in flight (dra/offload.py reads 16 at once) plus the publisher's
    # calls and watch; the default (5 per CPU) would close and reopen connections after every burst.
    configuration.connection_pool_maxsize = max(configuration.connection_pool_maxsize or 0, KEPT_CONNECTIONS)
    return k8s.ApiClient(configuration)


def is_transient(error: Exception) -> bool:
    """Worth retrying: the server is unreachable, overloaded or failing (not: the request is wrong)."""
    if isinstance(error, ApiException):
        return error.status in (0, 429) or (error.status or 0) >= 500
    # Connection refused/reset, timeouts. Anything else (a conflict loop, a bug of ours) is no outage.
    return isinstance(error, urllib3.exceptions.HTTPError | OSError)


def newest_resource_version(client: k8s.ApiClient) -> str:
    """v1, else v1beta2, else v1beta1: the newest resource.k8s.io version the server serves."""
    try:
        group = k8s.ResourceApi(client).get_api_group(_request_timeout=REQUEST_TIMEOUT_S)
    except ApiException as error:
        if error.status == 404:
            raise UnsupportedApiError(
                f"the API server does not serve {GROUP} at all; Dynamic Resource Allocation needs Kubernetes >= 1.32"
            ) from error
        raise
    served = {v.version for v in group.versions or ()}
    for version in API_VERSIONS:
        if version in served:
            return version
    raise UnsupportedApiError(
        f"the API server serves {GROUP} versions {sorted(served)}; this driver needs one of "
        f"{', '.join(API_VERSIONS)} (Kubernetes >= 1.32)"
    )


def node_uid(client: k8s.ApiClient, node_name: str) -> str:
    node = k8s.CoreV1Api(client).read_node(node_name, _request_timeout=REQUEST_TIMEOUT_S)
    if node.metadata is None or not node.metadata.uid:
        raise PluginError(f"node {node_name} has no metadata.uid: cannot own our ResourceSlices")
    return str(node.metadata.uid)


def check_claim_name(namespace: str, name: str) -> None:
    """ValueError (short) unless `namespace` is a DNS label and `name` a DNS subdomain, as the API server
    requires: a name from the kubelet's request goes into a URL only when an object can have it."""
    if len(namespace) > MAX_NAMESPACE_CHARS or not _DNS_LABEL.fullmatch(namespace):
        raise ValueError(f"namespace {short(namespace)} is not a valid namespace name (a DNS label)")
    if len(name) > MAX_NAME_CHARS or not _DNS_SUBDOMAIN.fullmatch(name):
        raise ValueError(f"name {short(name)} is not a valid object name (a DNS subdomain of at most 253 characters)")


class ApiClaimReader:
    """The Preparer's ClaimReader: GET the ResourceClaim in the discovered resource.k8s.io version.

    One read per claim in NodePrepareResources, so its CPU counts (bench_checkpoint.py (c): 1,000 claims at
    once on a 2-core node, where the driver's interpreter is the bottleneck). The request carries what the
    client's configuration says (its host, default headers and cookie, BearerToken auth through
    update_params_for_auth, which refreshes an expiring token) and the client sends it (call_api), but
    nothing else of the generated method runs: its argument validation (pydantic), its generic request
    building (param_serialize) and response deserialization cost ~0.25 ms of the ~0.85 ms a read took,
    for a URL of two validated names and a plain dict. A client without those calls (an older generator)
    takes the generated method (`direct=False` too, for tests).
    """

    def __init__(self, client: k8s.ApiClient, api_version: str, *, direct: bool | None = None) -> None:
        """`direct`: take the direct path (None: whenever the client has it; False: the generated method)."""
        self._client = client
        self._objects = k8s.CustomObjectsApi(client)
        self._version = api_version
        # param_serialize marks the generator whose call_api(method, url, headers, ...) the direct path uses
        # (an older one's call_api takes a resource path and its parameters instead).
        has_direct = callable(getattr(client, "param_serialize", None))
        self._direct = has_direct if direct is None else direct and has_direct

    def get_claim(self, namespace: str, name: str) -> Mapping[str, Any] | None:
        """The claim, or None when it does not exist. ValueError: a name no claim can have (not sent)."""
        check_claim_name(namespace, name)
        if not self._direct:
            return self._generated(namespace, name)
        path = _CLAIM_PATH.format(group=GROUP, version=self._version, namespace=namespace, name=name)
        headers = {**self._client.default_headers, "Accept": "application/json"}
        if self._client.cookie:
            headers["Cookie"] = self._client.cookie
        self._client.update_params_for_auth(headers, [], ["BearerToken"], path, "GET", None)
        url = self._client.configuration.host + path
        try:
            response = self._client.call_api("GET", url, headers, _request_timeout=REQUEST_TIMEOUT_S)
        except ApiException as error:  # the client's own failures (a TLS error is status 0), worded as before
            raise RuntimeError(f"HTTP {error.status} {error.reason}") from error
        data = response.read()  # the whole body: the connection goes back to the pool
        if response.status == 404:
            return None
        if not 200 <= response.status <= 299:
            raise RuntimeError(f"HTTP {response.status} {response.reason}")
        return _object(data)

    def _generated(self, namespace: str, name: str) -> Mapping[str, Any] | None:
        try:
            response = self._objects.get_namespaced_custom_object(
                GROUP,
                self._version,
                namespace,
                "resourceclaims",
                name,
                _request_timeout=REQUEST_TIMEOUT_S,
                _preload_content=False,
            )
        except ApiException as error:
            if error.status == 404:
                return None
            raise RuntimeError(f"HTTP {error.status} {error.reason}") from error
        return _object(response.data)  # type: ignore[attr-defined]  # an urllib3 response (the stubs say object)


# check_claim_name lets only [a-z0-9.-] through, none of which a URL path quotes.
_CLAIM_PATH = "/apis/{group}/{version}/namespaces/{namespace}/resourceclaims/{name}"


def _object(data: bytes) -> Mapping[str, Any] | None:
    """The response body as a dict; None for a body that is JSON but not an object (no claim in it)."""
    obj = json.loads(data)
    return obj if isinstance(obj, dict) else None
