"""What `run --mode dra` builds before it opens NVML: the checks of the node's settings, then the
front-end.

Boundary: start-up only. The node name (NODE_NAME, from the downward API's spec.nodeName), the
socket paths (too long to bind: a config error now, not at serving time) and an API client
($KUBECONFIG when set, else the pod's service account); ConfigError names what is missing. The
front-end itself is dra/front_end.py's.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from kubernetes.config.config_exception import ConfigException

from device_plugin.config.model import Config
from device_plugin.core.errors import ConfigError
from device_plugin.dra.front_end import DraFrontEnd
from device_plugin.dra.start_settings import instance_of, kubelet_dir_of
from device_plugin.dra_helper.api.kube import api_client
from device_plugin.dra_helper.service.socket_paths import SocketPaths, check_socket_paths


def front_end_maker(config: Config, environ: Mapping[str, str]) -> Callable[[], DraFrontEnd]:
    """What `run --mode dra` needs before it opens NVML: the node name (NODE_NAME, from the downward
    API's spec.nodeName) and an API client ($KUBECONFIG when set, else the pod's service account).
    ConfigError names what is missing."""
    node_name = environ.get("NODE_NAME", "")
    if not node_name:
        raise ConfigError(
            "mode dra",
            "NODE_NAME is not set; set it from the downward API (fieldRef spec.nodeName)",
        )
    # sockets too long to bind: a config error now, not at serving time
    driver_name = config.daemon.driver_name
    instance = instance_of(config, environ)
    check_socket_paths(
        driver_name, SocketPaths.for_driver(driver_name, kubelet_dir_of(config), instance)
    )
    try:
        client = api_client()
    except ConfigException as error:
        reason = f"no API server to talk to (KUBECONFIG or in-cluster service account): {error}"
        raise ConfigError("mode dra", reason) from None
    return lambda: DraFrontEnd.for_config(config, client, node_name=node_name, instance=instance)
