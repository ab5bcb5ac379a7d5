"""How a config field is declared: once, on its dataclass attribute, with everything the sources
need.

A field of the config dataclasses (config/model.py, config/health.py) is written
`name: type = setting(key, kind, default=..., reload=..., env=..., cli=...)`. The declaration (a
frozen Setting in the attribute's metadata) holds the file key, the check and text parser (`kind`),
the environment variable, the command-line flag, the reload class, and for NVIDIA's fields this
plugin accepts without acting on them, which values have no effect (not_applied). Everything else is
derived from it by walking the dataclasses (declared()): the schema table and env map
(config/model.py), the argparse flags (commands/run.py), the health section's keys
(config/health.py), the reload rules (config/reload.py) and the docs table test. Nested sections are
`section(key, Class)` attributes.

Boundary: declarations and the walk only; no checking of values (config/schema.py) and no loading.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import MISSING, dataclass, field, fields
from enum import StrEnum
from typing import Any

from device_plugin.config.schema import Field

SETTING = "setting"  # dataclass field metadata key of a Setting
SECTION = "section"  # ... and of a nested section's key


class Reload(StrEnum):
    """What a hot reload does with a changed value (the daemon applies these; config/reload.py sorts
    them)."""

    AT_ONCE = "applied at once"  # the running daemon takes it without touching what is served
    # every resource is served afresh (its policy or Allocate answer may differ)
    RESERVE = "re-serves"
    RESTART = "restart"  # the running value stays until the plugin restarts; the log says so
    # taken into the config at once, used when resources are next re-served
    NEXT_RESERVE = "next re-serve"
    # chooses what the process runs (mode); a running process ignores a new value
    START_ONLY = "start only"


@dataclass(frozen=True)
class CliFlag:
    """A `run` command-line flag. Its value is text, parsed like the environment's
    (kind.from_text)."""

    flag: str  # e.g. "--mig-strategy"
    help: str
    metavar: str | None = None
    optional_value: bool = False  # `--flag` alone means "true" (nargs="?", const="true")

    @property
    def dest(self) -> str:
        return self.flag.lstrip("-").replace("-", "_")


@dataclass(frozen=True)
class Setting:
    key: str  # the key inside its section of the file, e.g. "migStrategy"
    kind: Field  # file value check, and env/CLI text parser
    reload: Reload
    env: str | None = None
    cli: CliFlag | None = None
    empty_means_off: bool = False  # the env var set but empty still means something: "turn it off"
    section_env: tuple[str, ...] = ()  # env vars the section's own parser reads (health: DP_*)
    # NVIDIA's fields accepted so a ConfigMap loads: which values have no effect here
    # (config/not_applied.py)
    not_applied: Callable[[Any], bool] | None = None
    # NVIDIA's other names for the same variable, read when `env` is not set (first set one wins)
    env_aliases: tuple[str, ...] = ()


def setting(
    key: str,
    kind: Field,
    *,
    reload: Reload,
    default: Any = MISSING,
    default_factory: Callable[[], Any] | None = None,
    env: str | None = None,
    cli: CliFlag | None = None,
    empty_means_off: bool = False,
    section_env: tuple[str, ...] = (),
    not_applied: Callable[[Any], bool] | None = None,
    env_aliases: tuple[str, ...] = (),
) -> Any:
    """A dataclass field carrying its declaration (typed Any so the attribute keeps its own
    type)."""
    metadata = {
        SETTING: Setting(
            key, kind, reload, env, cli, empty_means_off, section_env, not_applied, env_aliases
        )
    }
    if default_factory is not None:
        return field(default_factory=default_factory, metadata=metadata)
    return field(default=default, metadata=metadata)


def section(key: str, cls: type) -> Any:
    """A nested section: a dataclass of settings under `key` in the file."""
    return field(default_factory=cls, metadata={SECTION: key})


@dataclass(frozen=True)
class Declared:
    """One declared field, found by walking the dataclasses from a root."""

    path: str  # dotted file path, e.g. "flags.plugin.deviceIDStrategy"
    # attribute path from the root, e.g. ("flags", "plugin", "device_id_strategy")
    attrs: tuple[str, ...]
    setting: Setting
    default: Any


def declared(root: type, prefix: str = "", attrs: tuple[str, ...] = ()) -> tuple[Declared, ...]:
    """Every Setting under `root`, in declaration order, sections included (depth first)."""
    found: list[Declared] = []
    for f in fields(root):
        if SETTING in f.metadata:
            s: Setting = f.metadata[SETTING]
            default = f.default_factory() if f.default_factory is not MISSING else f.default
            found.append(Declared(_join(prefix, s.key), (*attrs, f.name), s, default))
        elif SECTION in f.metadata:
            child = f.default_factory
            assert isinstance(child, type), f"section {f.name} needs its class as default_factory"
            found.extend(declared(child, _join(prefix, f.metadata[SECTION]), (*attrs, f.name)))
    return tuple(found)


def get(root: Any, attrs: tuple[str, ...]) -> Any:
    for attr in attrs:
        root = getattr(root, attr)
    return root


def _join(prefix: str, key: str) -> str:
    return f"{prefix}.{key}" if prefix else key
