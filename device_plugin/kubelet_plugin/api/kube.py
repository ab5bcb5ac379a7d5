"""The API server through the official `kubernetes` client: connection, version discovery, names.

Boundary: with `publisher` (and its slice store and watch), what talks to the API server through the
client; claim reads use the client's connection settings and the headers built here (fixed_headers,
auth_headers) but not its transport (kubelet_plugin/claims/fetch.py).
ResourceSlices go through the client's generic object calls (CustomObjectsApi works for any
group/version path, built-in ones included), so the objects stay plain dicts in exactly the shape
`slices` builds and the server returns, for whichever resource.k8s.io version the server offers.
The Node is read once, for its UID (the slices' owner reference), with one GET through the client's own
connection pool (its host, TLS, proxy, headers and token), not CoreV1Api: importing CoreV1Api builds
the models of the whole core group, 0.36 s of CPU at every start (more on a slow node) before the
first slice can be published, for one field.
"""

from __future__ import annotations

import json
import os
from urllib.parse import quote

import urllib3
from kubernetes import client as k8s
from kubernetes import config as k8s_config
from kubernetes.client.exceptions import ApiException

from device_plugin.core.errors import PluginError
from device_plugin.core.short_text import one_line, short
from device_plugin.kubelet_plugin.api.slices import API_VERSIONS, GROUP

REQUEST_TIMEOUT_S = 5.0
MAX_NODE_BYTES = 16 * 1024 * 1024  # a Node with every image it holds listed is well under this


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
    return k8s.ApiClient(configuration)


def is_transient(error: Exception) -> bool:
    """Worth retrying: the server is unreachable, overloaded or failing (not: the request is wrong)."""
    if isinstance(error, ApiException):
        return error.status in (0, 429) or (error.status or 0) >= 500
    # Connection refused/reset, timeouts. Anything else (a conflict loop, a bug of ours) is no outage.
    return isinstance(error, urllib3.exceptions.HTTPError | OSError)


def status_message(error: ApiException) -> str:
    """The `message` of the Status an ApiException carries (its body), else its reason; one line, bounded."""
    try:
        message = json.loads(error.body or "").get("message")
    except (ValueError, AttributeError):
        message = None
    return one_line(str(message if isinstance(message, str) else error.reason), 300)


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


def fixed_headers(client: k8s.ApiClient) -> dict[str, str]:
    """The headers the client sends with every JSON GET, but its auth: its defaults (User-Agent), cookie."""
    headers = {**client.default_headers, "Accept": "application/json"}
    if client.cookie:
        headers["Cookie"] = client.cookie
    return headers


def auth_headers(configuration: k8s.Configuration) -> dict[str, str]:
    """The client's auth headers (its token). Blocks while the client's refresh hook renews a stale token
    (a file read in a pod; an exec plugin or OIDC request with a kubeconfig): never call it on the loop."""
    settings = configuration.auth_settings().values()
    return {s["key"]: s["value"] for s in settings if s.get("in") == "header" and s.get("value")}


def node_uid(client: k8s.ApiClient, node_name: str) -> str:
    """The Node's metadata.uid. ApiException for an answer other than the Node (a 5xx or 429 is transient,
    as is a connection failure: urllib3's HTTPError); PluginError for a Node without one."""
    # Uncompressed, read undecoded: the bound then counts what would be parsed, whatever urllib3's version.
    headers = {**fixed_headers(client), **auth_headers(client.configuration), "Accept-Encoding": "identity"}
    url = f"{client.configuration.host.rstrip('/')}/api/v1/nodes/{quote(node_name, safe='')}"
    response = client.rest_client.pool_manager.request(
        "GET",
        url,
        headers=headers,
        timeout=urllib3.Timeout(total=REQUEST_TIMEOUT_S),
        preload_content=False,
        decode_content=False,
    )
    try:
        data = response.read(MAX_NODE_BYTES + 1)
    except BaseException:
        response.close()
        raise
    encoding = response.headers.get("Content-Encoding", "identity").strip().lower()
    if len(data) > MAX_NODE_BYTES or encoding != "identity":
        response.close()  # the rest unread: the connection cannot be used again
        what = f"passes {MAX_NODE_BYTES >> 20} MiB" if len(data) > MAX_NODE_BYTES else f"is {short(encoding)}"
        raise PluginError(f"the API server's answer for node {short(node_name)} {what}: not a Node we read")
    response.release_conn()  # read to its end: back to the pool
    if response.status != 200:
        reason = one_line(f"{response.reason} (reading node {node_name})", 300)
        raise ApiException(status=response.status, reason=reason)
    try:
        uid = json.loads(data)["metadata"]["uid"]
    except (ValueError, TypeError, KeyError):
        uid = None
    if not isinstance(uid, str) or not uid:
        raise PluginError(f"node {short(node_name)} has no metadata.uid: cannot own our ResourceSlices")
    return uid
