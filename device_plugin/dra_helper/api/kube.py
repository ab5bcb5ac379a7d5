"""The API server's settings and the publisher's first questions: which version, which Node (UID,
runtime).

Boundary: the `kubernetes` client is where the connection settings come from (api_client: a
kubeconfig or the pod's service account, with the client's token refresh); every request goes
through transport.py. Discovery picks the newest resource.k8s.io version the server serves, so the
slices stay plain dicts in exactly the shape `slices` builds and the server returns, for whichever
version. The Node is read once, for its UID (the slices' owner reference), with one bounded GET, not
the client's CoreV1Api: importing it builds the models of the whole core group, 0.36 s of CPU at
every start (more on a slow node) before the first slice can be published, for one field.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from urllib.parse import quote

from kubernetes import client as k8s
from kubernetes import config as k8s_config

from device_plugin.core.errors import PluginError
from device_plugin.core.short_text import short
from device_plugin.dra_helper.api.api_errors import AnswerTooBig
from device_plugin.dra_helper.api.slices import API_VERSIONS, GROUP
from device_plugin.dra_helper.api.transport import Answer, ApiTransport

MAX_NODE_BYTES = 16 * 1024 * 1024  # a Node with every image it holds listed is well under this


class UnsupportedApiError(PluginError):
    """The API server serves no resource.k8s.io version we can publish (Kubernetes older than
    1.32)."""


def api_client(host: str | None = None) -> k8s.ApiClient:
    """The settings for `host` (tests, plain http), else $KUBECONFIG, else the pod's service
    account."""
    if host is not None:
        configuration = k8s.Configuration(host=host)
    elif os.environ.get("KUBECONFIG"):
        configuration = k8s.Configuration()
        k8s_config.load_kube_config(
            config_file=os.environ["KUBECONFIG"], client_configuration=configuration
        )
    else:
        configuration = k8s.Configuration()
        k8s_config.load_incluster_config(client_configuration=configuration)
    return k8s.ApiClient(configuration)


def newest_resource_version(transport: ApiTransport) -> str:
    """v1, else v1beta2, else v1beta1: the newest resource.k8s.io version the server serves (from a
    thread)."""
    return _served_version(transport.call("GET", f"/apis/{GROUP}"))


async def newest_resource_version_on_loop(transport: ApiTransport) -> str:
    """newest_resource_version, awaited on the serving loop: no thread of the loop's pool waits on
    the loop (a read that blocked a pool thread on the loop starved the token read it needed, at
    every start with six or more checkpointed claims)."""
    return _served_version(await transport.send("GET", f"/apis/{GROUP}"))


def _served_version(answer: Answer) -> str:
    if answer.status == 404:
        raise UnsupportedApiError(
            f"the API server does not serve {GROUP} at all; Dynamic Resource Allocation needs "
            "Kubernetes >= 1.32"
        )
    group = answer.json(f"reading API group {GROUP}")
    versions = group.get("versions") if isinstance(group, dict) else None
    served = {v.get("version") for v in versions or () if isinstance(v, dict)}
    for version in API_VERSIONS:
        if version in served:
            return version
    raise UnsupportedApiError(
        f"the API server serves {GROUP} versions {sorted(str(v) for v in served)}; this driver "
        "needs one of "
        f"{', '.join(API_VERSIONS)} (Kubernetes >= 1.32)"
    )


@dataclass(frozen=True)
class NodeFacts:
    uid: str  # metadata.uid: the slices' owner reference
    # status.nodeInfo.containerRuntimeVersion ("containerd://1.7.2"), "" if not reported
    container_runtime: str


def read_node(transport: ApiTransport, node_name: str) -> NodeFacts:
    """The Node's metadata.uid and container runtime (from a thread). ApiError for an answer other
    than the Node (a 5xx or 429 is transient), ApiUnreachable for no answer (api_errors.py);
    PluginError for a Node without a UID or past the bound."""
    try:
        answer = transport.call(
            "GET", f"/api/v1/nodes/{quote(node_name, safe='')}", limit_bytes=MAX_NODE_BYTES
        )
    except AnswerTooBig as error:
        raise PluginError(f"node {short(node_name)}: {error}: not a Node we read") from None
    try:
        node = answer.json(f"reading node {node_name}")
    except ValueError:
        node = None
    metadata = node.get("metadata") if isinstance(node, dict) else None
    uid = metadata.get("uid") if isinstance(metadata, dict) else None
    if not isinstance(uid, str) or not uid:
        raise PluginError(
            f"node {short(node_name)} has no metadata.uid: cannot own our ResourceSlices"
        )
    status = node.get("status") if isinstance(node, dict) else None
    info = status.get("nodeInfo") if isinstance(status, dict) else None
    runtime = info.get("containerRuntimeVersion") if isinstance(info, dict) else None
    return NodeFacts(uid, runtime[:200] if isinstance(runtime, str) else "")
