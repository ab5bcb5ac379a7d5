"""A config key spelled NVIDIA's other way, one level off, or mistyped gets "did you mean"; NVIDIA's Helm
chart values pasted as a config file get a message saying what they are and where the config file is."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from device_plugin.config.hints import MIGRATING_HELM
from device_plugin.config.loader import load_config
from device_plugin.config.model import parse_config
from device_plugin.core.errors import ConfigError

ROOT = Path(__file__).resolve().parents[2]

MISSPELT = [
    ("nvidia-id-capitalisation", "flags: {plugin: {deviceIdStrategy: index}}", "flags.plugin.deviceIDStrategy"),
    ("one-level-off", "flags: {deviceIDStrategy: index}", "flags.plugin.deviceIDStrategy"),
    ("cli-spelling", "flags: {plugin: {device-id-strategy: index}}", "flags.plugin.deviceIDStrategy"),
    ("env-spelling", "flags: {MIG_STRATEGY: mixed}", "flags.migStrategy"),
    ("typo", "flags: {migStrategyy: mixed}", "flags.migStrategy"),
    ("typo-in-our-section", "gpuDevicePlugin: {labelFile: /x}", "gpuDevicePlugin.labelsFile"),
    ("section-typo", "flag: {migStrategy: mixed}", "flags"),
    ("nvidia-cli-alias", "flags: {driverRoot: /run/nvidia/driver}", "flags.nvidiaDriverRoot"),
    ("helm-name-for-a-flag", "flags: {plugin: {compatWithCPUManager: true}}", "flags.plugin.passDeviceSpecs"),
    ("sharing-key", "sharing: {timeSlicing: {renamebyDefault: true}}", "sharing.timeSlicing.renameByDefault"),
    ("resources-key", "resources: {gpu: []}", "resources.gpus"),
    ("imex-key", "imex: {channelIds: [0]}", "imex.channelIDs"),
    ("health-key", "gpuDevicePlugin: {health: {ignoredXIDs: [13]}}", "gpuDevicePlugin.health.ignoredXids"),
]


@pytest.mark.parametrize(("text", "meant"), [c[1:] for c in MISSPELT], ids=[c[0] for c in MISSPELT])
def test_an_unknown_key_names_the_key_it_likely_meant(text: str, meant: str) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_config(yaml.safe_load(text))
    assert f"did you mean {meant}?" in caught.value.message, str(caught.value)


@pytest.mark.parametrize(
    "text", ["flags: {turbo: true}", "extras: {}"], ids=["nothing-close-in-flags", "nothing-close-at-the-top"]
)
def test_nothing_close_gets_no_guess(text: str) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_config(yaml.safe_load(text))
    assert caught.value.message == "unknown field"


# Excerpts of NVIDIA's chart values (deployments/helm/nvidia-device-plugin/values.yaml), as pasted.
HELM: list[tuple[str, dict[str, Any], str]] = [
    ("chart-flags", {"migStrategy": "mixed", "failOnInitError": True}, "migStrategy -> flags.migStrategy"),
    (
        "chart-with-config-map",
        {"config": {"map": {"default": "version: v1\n"}}, "devicePlugin": {"enabled": True}},
        "config.map",
    ),
    ("chart-pod-settings", {"image": {"repository": "nvcr.io/nvidia/k8s-device-plugin"}, "tolerations": []}, "image"),
    (
        "chart-values-with-a-resources-block",
        {"resources": {"limits": {"cpu": "1"}}, "nodeSelector": {}, "gdsEnabled": True},
        "gdsEnabled -> flags.gdsEnabled",
    ),
]


@pytest.mark.parametrize(("raw", "words"), [c[1:] for c in HELM], ids=[c[0] for c in HELM])
def test_helm_values_are_named_as_such_with_the_way_to_the_config_file(
    tmp_path: Path, raw: dict[str, Any], words: str
) -> None:
    path = tmp_path / "values.yaml"
    path.write_text(yaml.safe_dump(raw))
    with pytest.raises(ConfigError) as caught:
        load_config(config_file=path)
    message = caught.value.message
    assert caught.value.field == "config file"
    assert "Helm chart" in message and "config.map" in message and MIGRATING_HELM in message
    assert words in message


def test_a_v1_config_is_not_taken_for_helm_values() -> None:
    config = parse_config({"version": "v1", "flags": {"migStrategy": "mixed"}, "resources": {"gpus": []}})
    assert config.flags.mig_strategy == "mixed"


def test_the_helm_hint_points_at_a_section_that_exists() -> None:
    doc, anchor = MIGRATING_HELM.split("#")
    headings = re.findall(r"^#+ (.+)$", (ROOT / doc).read_text(), flags=re.MULTILINE)
    slugs = {re.sub(r"[^a-z0-9 -]", "", h.lower()).replace(" ", "-") for h in headings}
    assert anchor in slugs


def test_the_configmap_object_itself_is_named_as_such(tmp_path: Path) -> None:
    configmap = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "gpu-device-plugin-config"},
        "data": {"config.yaml": "version: v1\n"},
    }
    path = tmp_path / "configmap.yaml"
    path.write_text(yaml.safe_dump(configmap))
    with pytest.raises(ConfigError) as caught:
        load_config(config_file=path)
    assert caught.value.field == "config file"
    assert "Kubernetes ConfigMap object" in caught.value.message and "config.yaml" in caught.value.message
