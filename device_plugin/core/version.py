"""The version of the installed package, as `--version` and the daemon's first log line print it."""

from __future__ import annotations

from importlib import metadata

PACKAGE = "gpu-device-plugin"


def package_version() -> str:
    """The installed distribution's version; "unknown" when run from a tree that was never
    installed."""
    try:
        return metadata.version(PACKAGE)
    except metadata.PackageNotFoundError:
        return "unknown"
