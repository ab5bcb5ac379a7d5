"""kubernetes-validate's strict check, with each schema loaded once (the stand-ins validate every write).

Same schemas, same rules as `kubernetes_validate.validate(obj, release, strict=True)`: the release's strict
JSON schema for the object's kind and apiVersion, against the release's definitions, with a Draft 2020-12
validator. The library reads and parses its multi-megabyte definitions file on every call (about 0.1 s);
this keeps one validator per (release, kind, apiVersion), so a stand-in's answer is not dominated by it.
"""

from __future__ import annotations

import functools
import re
import threading
from typing import Any

import jsonschema
import kubernetes_validate
from kubernetes_validate.utils import all_versions, major_minor, schema_contents
from referencing import Registry, Resource

_lock = threading.Lock()


@functools.lru_cache(maxsize=64)
def _validator(release: str, kind: str, api_version: str) -> Any:
    version = [v for v in all_versions() if major_minor(v) <= major_minor(release)][-1]
    schema_dir = f"v{version}-local-strict"
    group_version = re.sub(r"^([^./]*)(?:\.[^/]*)?/", r"\1-", api_version)
    schema = schema_contents(f"kubernetes-json-schema/{schema_dir}/{kind.lower()}-{group_version}.json", release)
    definitions = schema_contents(f"kubernetes-json-schema/{schema_dir}/_definitions.json", release)
    registry: Registry = Resource.from_contents(definitions) @ (Resource.from_contents(schema) @ Registry())
    return jsonschema.validators.Draft202012Validator(schema, registry=registry)


def validate_strict(obj: dict[str, Any], release: str) -> None:
    """Raise kubernetes_validate.ValidationError when `obj` is not valid for `release` (strict)."""
    with _lock:
        validator = _validator(release, obj["kind"], obj["apiVersion"])
    try:
        validator.validate(obj)
    except jsonschema.ValidationError as error:
        raise kubernetes_validate.ValidationError(error, version=major_minor(release)) from None
