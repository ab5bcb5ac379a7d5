"""The optional NetworkPolicy: it selects the plugin's pods, opens only the metrics port, and only to Prometheus."""

from __future__ import annotations

from typing import Any

import kubernetes_validate
import pytest

from tests.deploy.conftest import Rendered, container, only

OVERLAY = "overlays/network-policy"


def the_policy(rendered: Rendered) -> dict[str, Any]:
    return only(rendered[OVERLAY], "NetworkPolicy")


def test_it_selects_exactly_the_plugin_pods(rendered: Rendered) -> None:
    policy = the_policy(rendered)
    daemonset = only(rendered[OVERLAY], "DaemonSet")
    assert policy["metadata"]["namespace"] == daemonset["metadata"]["namespace"]
    pod_labels = daemonset["spec"]["template"]["metadata"]["labels"]
    selector = policy["spec"]["podSelector"]["matchLabels"]
    assert selector.items() <= pod_labels.items()


def test_only_the_metrics_port_is_open_and_only_to_prometheus(rendered: Rendered) -> None:
    policy = the_policy(rendered)
    (rule,) = policy["spec"]["ingress"]
    (peer,) = rule["from"]
    named_ports = {p["name"]: p["containerPort"] for p in container(rendered[OVERLAY])["ports"]}
    assert policy["spec"]["policyTypes"] == ["Ingress"]
    assert [p["port"] for p in rule["ports"]] == ["metrics"] and named_ports["metrics"] == 2112
    # Both selectors in one peer means "Prometheus pods in that namespace", not "either".
    assert set(peer) == {"namespaceSelector", "podSelector"}
    assert peer["podSelector"]["matchLabels"] == {"app.kubernetes.io/name": "prometheus"}


def test_the_probes_use_the_port_the_policy_governs(rendered: Rendered) -> None:
    probes = container(rendered[OVERLAY])
    assert {probes["livenessProbe"]["httpGet"]["port"], probes["readinessProbe"]["httpGet"]["port"]} == {"metrics"}


def test_validation_would_catch_a_peer_typo(rendered: Rendered) -> None:
    policy = the_policy(rendered)
    broken = {**policy, "spec": {**policy["spec"], "ingress": [{"from": [{"namespaceSelecter": {}}]}]}}
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(broken, "1.33", strict=True)
