"""The `resources` section (NVIDIA's per-model resource names) as typed rules, checked at load.

A pattern is a glob (`*` matches any run of characters) over the whole product name (`gpus`) or MIG
profile (`mig`), case-sensitive; a name gets the `nvidia.com/` prefix and is at most 63 characters of a
Kubernetes name. What the rules do to the served resources is device_plugin/allocation/resource_naming.py's.
Boundary: parsing into frozen values; ConfigError names the field (`resources.gpus[1].name`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from device_plugin.core.errors import ConfigError
from device_plugin.core.names import GPU_RESOURCE, NVIDIA_DOMAIN
from device_plugin.core.short_text import short

PREFIX = f"{NVIDIA_DOMAIN}/"
MIG_PREFIX = f"{PREFIX}mig-"
_NAME = re.compile(r"^[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$")  # a qualified name's name part


@dataclass(frozen=True)
class NamingRule:
    pattern: str
    name: str  # with the nvidia.com/ prefix
    regex: re.Pattern[str]

    def matches(self, text: str) -> bool:
        return self.regex.fullmatch(text) is not None


@dataclass(frozen=True)
class ResourceNaming:
    gpus: tuple[NamingRule, ...] = ()
    mig: tuple[NamingRule, ...] = ()

    @property
    def empty(self) -> bool:
        return not self.gpus and not self.mig

    def gpu_name(self, product: str) -> str:
        return next((rule.name for rule in self.gpus if rule.matches(product)), GPU_RESOURCE)

    def mig_name(self, profile: str, default: str) -> str:
        return next((rule.name for rule in self.mig if rule.matches(profile)), default)


def parse_resource_naming(section: Mapping[str, Any]) -> ResourceNaming:
    """The `resources` section (shape already checked by config/sections.py) as rules; ConfigError names the field."""
    return ResourceNaming(_rules(section, "gpus"), _rules(section, "mig"))


def _rules(section: Mapping[str, Any], kind: str) -> tuple[NamingRule, ...]:
    rules = []
    for i, entry in enumerate(section.get(kind) or ()):
        where = f"resources.{kind}[{i}]"
        pattern, name = str(entry["pattern"]), str(entry["name"])
        plain = name.removeprefix(PREFIX)
        if "/" in plain:
            raise ConfigError(
                f"{where}.name", f"{short(name)}: resource names are nvidia.com/<name>; give <name> alone"
            )
        if not _NAME.match(plain):
            raise ConfigError(
                f"{where}.name",
                f"{short(name)} is not a resource name: at most 63 letters, digits, '-', '_' or '.', "
                "starting and ending with a letter or digit",
            )
        regex = re.compile("".join(".*" if part == "*" else re.escape(part) for part in re.split(r"(\*)", pattern)))
        rules.append(NamingRule(pattern, PREFIX + plain, regex))
    return tuple(rules)
