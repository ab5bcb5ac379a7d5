"""The API server through the official `kubernetes` client: connection, version discovery, names.

Boundary: with `publisher` (and its slice store and watch), what talks to the API server through the
client; claim reads use the client's connection settings but not its transport (dra/claim_fetch.py).
ResourceSlices go through the client's generic object calls (CustomObjectsApi works for any
group/version path, built-in ones included), so the objects stay plain dicts in exactly the shape
`slices` builds and the server returns, for whichever resource.k8s.io version the server offers.
Nodes are read with CoreV1Api (we only need the UID, for the slices' owner reference).
"""

from __future__ import annotations

import os
import re

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
