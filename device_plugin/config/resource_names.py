"""The `resources` section (NVIDIA's per-model resource names) as typed rules, checked at load.

A pattern is a glob (`*` matches any run of characters) over the whole product name (`gpus`) or MIG
profile (`mig`), case-sensitive, matched in one left-to-right pass (no regex: `.*` runs backtrack,
and 14 stars took 17 s a match), at most MAX_PATTERN_CHARS long with at most MAX_PATTERN_STARS
stars; a name gets the `nvidia.com/` prefix and is at most 63 characters of a Kubernetes name. What
the rules do to the served resources is device_plugin/allocation/resource_naming.py's. Boundary:
parsing into frozen values; ConfigError names the field (`resources.gpus[1].name`).
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
# a qualified name's name part
_NAME = re.compile(r"^[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?\Z")
MAX_PATTERN_CHARS = 128  # NVML product names are under 96 characters; MIG profiles under 20
MAX_PATTERN_STARS = 8  # NVIDIA's examples use one to three


@dataclass(frozen=True)
class NamingRule:
    pattern: str
    name: str  # with the nvidia.com/ prefix

    def matches(self, text: str) -> bool:
        return glob_matches(self.pattern, text)


def glob_matches(pattern: str, text: str) -> bool:
    """Whether `text` matches `pattern` whole, `*` standing for any run: the first piece is a
    prefix, the last a suffix, and each middle piece is taken at its leftmost place after the one
    before (leftmost is never worse for the pieces after it), so a match costs one pass over `text`
    per piece, never a backtrack."""
    pieces = pattern.split("*")
    if len(pieces) == 1:
        return text == pattern
    first, *middle, last = pieces
    if len(text) < len(first) + len(last) or not text.startswith(first) or not text.endswith(last):
        return False
    at, end = len(first), len(text) - len(last)
    for piece in middle:
        found = text.find(piece, at, end)
        if found < 0:
            return False
        at = found + len(piece)
    return True


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
    """The `resources` section (shape already checked by config/sections.py) as rules; ConfigError
    names the field."""
    return ResourceNaming(_rules(section, "gpus"), _rules(section, "mig"))


def _rules(section: Mapping[str, Any], kind: str) -> tuple[NamingRule, ...]:
    rules = []
    for i, entry in enumerate(section.get(kind) or ()):
        where = f"resources.{kind}[{i}]"
        pattern, name = str(entry["pattern"]), str(entry["name"])
        plain = name.removeprefix(PREFIX)
        if "/" in plain:
            raise ConfigError(
                f"{where}.name",
                f"{short(name)}: resource names are nvidia.com/<name>; give <name> alone",
            )
        if not _NAME.match(plain):
            raise ConfigError(
                f"{where}.name",
                f"{short(name)} is not a resource name: at most 63 letters, digits, '-', '_' or "
                "'.', "
                "starting and ending with a letter or digit",
            )
        _check_pattern(f"{where}.pattern", pattern)
        rules.append(NamingRule(pattern, PREFIX + plain))
    return tuple(rules)


def _check_pattern(field: str, pattern: str) -> None:
    if not pattern or len(pattern) > MAX_PATTERN_CHARS:
        raise ConfigError(field, f"{short(pattern)} must be 1 to {MAX_PATTERN_CHARS} characters")
    if pattern.count("*") > MAX_PATTERN_STARS:
        raise ConfigError(
            field, f"{short(pattern)} has {pattern.count('*')} '*'; at most {MAX_PATTERN_STARS}"
        )
    if "\n" in pattern or not pattern.isprintable():
        raise ConfigError(
            field, f"{short(pattern)} holds a control character; product names have none"
        )
