"""Hints for a config that does not load: "did you mean" for an unknown key, and NVIDIA Helm values.

Boundary: words in, a sentence out; the callers raise the ConfigError naming the field. Two kinds of
slip are common when a ConfigMap is copied from NVIDIA's plugin:
- a key spelled another way: NVIDIA's own spellings in other places (`deviceIdStrategy`, the CLI's
  `device-id-strategy`, the env's `DEVICE_ID_STRATEGY`), a key one level off
  (`flags.deviceIDStrategy` for `flags.plugin.deviceIDStrategy`), or a plain typo. Keys are compared
  with case, `-` and `_` ignored first, then by similarity;
- the Helm chart's values file (`migStrategy:` at the top, `devicePlugin:`, `image:`,
  `tolerations:`) pasted where the config file goes. The config file is what the chart puts under
  `config.map`;
- the ConfigMap object itself (`apiVersion`, `kind`, `data`) given as the file: the config file is
  one value under its `data`.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Mapping

MIGRATING_HELM = "docs/migrating.md#from-nvidias-helm-values"

# NVIDIA's other names for a key we have (its CLI flag names, and the chart's value that sets it).
ALIASES = {
    "driverroot": "flags.nvidiaDriverRoot",
    "devroot": "flags.nvidiaDevRoot",
    "nvidiacdihookpath": "flags.plugin.nvidiaCTKPath",
    "driverrootctrpath": "flags.plugin.containerDriverRoot",
    "compatwithcpumanager": "flags.plugin.passDeviceSpecs",
    "configfile": "--config",
}

# Top-level keys of NVIDIA's chart values (deployments/helm/nvidia-device-plugin/values.yaml) that
# are no top-level key of the config file; each maps to the config key it sets, where there is one.
HELM_VALUES = {
    "migStrategy": "flags.migStrategy",
    "failOnInitError": "flags.failOnInitError",
    "compatWithCPUManager": "flags.plugin.passDeviceSpecs",
    "deviceListStrategy": "flags.plugin.deviceListStrategy",
    "deviceIDStrategy": "flags.plugin.deviceIDStrategy",
    "nvidiaDriverRoot": "flags.nvidiaDriverRoot",
    "nvidiaDevRoot": "flags.nvidiaDevRoot",
    "gdrcopyEnabled": "flags.gdrcopyEnabled",
    "gdsEnabled": "flags.gdsEnabled",
    "mofedEnabled": "flags.mofedEnabled",
    "deviceDiscoveryStrategy": "flags.deviceDiscoveryStrategy",
    "config": "",
    "legacyDaemonsetAPI": "",
    "fullnameOverride": "",
    "nameOverride": "",
    "namespaceOverride": "",
    "selectorLabelsOverride": "",
    "allowDefaultNamespace": "",
    "imagePullSecrets": "",
    "image": "",
    "updateStrategy": "",
    "podAnnotations": "",
    "podSecurityContext": "",
    "securityContext": "",
    "nodeSelector": "",
    "affinity": "",
    "tolerations": "",
    "priorityClassName": "",
    "runtimeClassName": "",
    "devicePlugin": "",
    "gfd": "flags.gfd",
    "mps": "",
    "cdi": "",
    "nfd": "",
    "node-feature-discovery": "",
}


def _plain(word: str) -> str:
    return word.replace("-", "").replace("_", "").lower()


def did_you_mean(path: str, known_paths: Iterable[str]) -> str | None:
    """The known dotted path `path` most likely meant (same section first, then anywhere), or
    None."""
    known = [p for p in known_paths if p]
    prefix, _, key = path.rpartition(".")
    if _plain(key) in ALIASES:
        return ALIASES[_plain(key)]
    siblings = [p for p in known if p.rpartition(".")[0] == prefix]
    elsewhere = [p for p in known if p not in siblings]
    for group in (siblings, elsewhere):
        same = [p for p in group if _plain(p.rpartition(".")[2]) == _plain(key)]
        if same:
            return same[0]
    by_plain = {_plain(p.rpartition(".")[2]): p for p in siblings}
    close = difflib.get_close_matches(_plain(key), list(by_plain), n=1, cutoff=0.75)
    return by_plain[close[0]] if close else None


def unknown_key(path: str, known_paths: Iterable[str]) -> str:
    """'unknown field', with the likeliest meant key when there is one."""
    guess = did_you_mean(path, known_paths)
    return f"unknown field; did you mean {guess}?" if guess else "unknown field"


def kubernetes_object_message(raw: Mapping[str, object]) -> str | None:
    """A message when the file is a Kubernetes object (the ConfigMap itself, say); None
    otherwise."""
    if "apiVersion" not in raw or "kind" not in raw:
        return None
    data = raw.get("data")
    keys = ", ".join(str(k) for k in data) if isinstance(data, Mapping) else ""
    inside = f" (this one holds: {keys})" if keys else ""
    return (
        f"this is a Kubernetes {raw.get('kind')} object, not a config file. The config file is one "
        "value under "
        f"the ConfigMap's data{inside}, mounted as a file; point --config or CONFIG_FILE at that "
        "file"
    )


def helm_values_message(raw: Mapping[str, object], top_level: Iterable[str]) -> str | None:
    """A message when the file's top-level keys are NVIDIA's Helm chart values; None otherwise."""
    known = set(top_level)
    found = [str(k) for k in raw if str(k) in HELM_VALUES and str(k) not in known]
    if not found:
        return None
    mapped = [f"{k} -> {HELM_VALUES[k]}" for k in found if HELM_VALUES[k]]
    where = f" In a config file: {', '.join(mapped)}." if mapped else ""
    return (
        f"this looks like the values of NVIDIA's Helm chart ({', '.join(found[:6])}), not a config "
        "file. "
        "The config file is the `version: v1` document the chart takes under config.map.<name>; "
        "paste that."
        f"{where} See {MIGRATING_HELM}"
    )
