"""Strict schema checks of the objects the API stand-in is sent, each schema loaded once per process.

kubernetes_validate.validate() reads and parses the release's whole definitions file (megabytes of JSON)
on every call: 65-110 ms per ResourceSlice, which the stand-in spent under its lock, so a slice write
held up every other request (a claim read by NodePrepareResources among them) and the DRA benchmark
measured the stand-in, not the driver. Here the validator for a (release, kind, apiVersion) is built the
way kubernetes_validate builds it (same schema files, same strict variant, same release pick) and kept.
tests/dra/test_schema_check.py checks that both agree.
"""

from __future__ import annotations

import functools
import re
from typing import Any

import jsonschema
import kubernetes_validate
from kubernetes_validate.utils import all_versions, major_minor, schema_contents
from referencing import Registry, Resource


def validate_strictly(obj: dict[str, Any], release: str) -> None:
    """As kubernetes_validate.validate(obj, release, strict=True): raises its ValidationError when invalid."""
    validator, schema_release = _validator(release, obj["kind"], obj["apiVersion"])
    try:
        validator.validate(obj)
    except jsonschema.ValidationError as error:
        raise kubernetes_validate.ValidationError(error, version=schema_release) from None


@functools.cache
def _validator(release: str, kind: str, api_version: str) -> tuple[jsonschema.protocols.Validator, str]:
    # The newest schema release not newer than the one asked for, as kubernetes_validate picks it.
    schema_release = [v for v in all_versions() if major_minor(v) <= major_minor(release)][-1]
    directory = f"kubernetes-json-schema/v{schema_release}-local-strict"
    group_version = re.sub(r"^([^./]*)(?:\.[^/]*)?/", r"\1-", api_version)  # resource.k8s.io/v1 -> resource-v1
    schema = schema_contents(f"{directory}/{kind.lower()}-{group_version}.json", release)
    definitions = schema_contents(f"{directory}/_definitions.json", release)
    registry = Resource.from_contents(definitions) @ (Resource.from_contents(schema) @ Registry())  # type: ignore[var-annotated]
    return jsonschema.validators.Draft202012Validator(schema, registry=registry), major_minor(schema_release)
