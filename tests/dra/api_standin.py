"""The tests' API stand-in: device_plugin/dra_standin/api_server.py's, with every write checked strictly by
kubernetes-validate (schema_check.py), a test-only dependency the package must not import.

A thin re-export, kept so the stand-in's many importers (tests, benchmarks) did not change in the move.
"""

from __future__ import annotations

from device_plugin.dra_standin.api_objects import GROUP, MAX_DEVICES_WITH_TAINTS, RELEASE_OF
from device_plugin.dra_standin.api_server import ApiStandin as _PackagedApiStandin
from tests.dra.schema_check import validate_strict

__all__ = ["GROUP", "MAX_DEVICES_WITH_TAINTS", "RELEASE_OF", "ApiStandin"]


class ApiStandin(_PackagedApiStandin):
    def __init__(self, versions: tuple[str, ...] = ("v1", "v1beta2", "v1beta1")) -> None:
        super().__init__(versions, validate=validate_strict)
