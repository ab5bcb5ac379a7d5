"""MigStrategy: NVIDIA's `migStrategy` values (none, single, mixed), named once.

The config declares the setting with these choices (config/flags.py), mig/strategy.py builds the
resources each one advertises, the node labels write it as `nvidia.com/mig.strategy`, and the node
runtime and the commands compare against it. What each strategy means is mig/strategy.py's
docstring. A StrEnum: a member equals its wire string, so config values read as text compare equal
to it.
"""

from __future__ import annotations

from enum import StrEnum

from device_plugin.core.errors import ConfigError

STRATEGY_FIELD = "flags.migStrategy"


class MigStrategy(StrEnum):
    NONE = "none"
    SINGLE = "single"
    MIXED = "mixed"

    @classmethod
    def parse(cls, value: str) -> MigStrategy:
        """The member named `value`; ConfigError on flags.migStrategy for any other text."""
        try:
            return cls(value)
        except ValueError:
            raise ConfigError(STRATEGY_FIELD, f"{value!r} is not one of {', '.join(cls)}") from None
