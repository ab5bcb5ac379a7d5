"""Parse YAML (and JSON) text with limits, so a hostile or broken document is refused fast and
clearly.

Boundary: text in, plain values out (or ConfigError naming the path inside the document); the only
module that imports PyYAML. Users: the config file (config/reading.py) and machine descriptions
(nvml/fake/description.py). Limits, reproduced by tests/adversarial/test_config_file_limits.py:
- no anchors, aliases or merge keys: an alias "bomb" of a few hundred bytes expands to gigabytes
  once anything walks it (a log line, an error message), so it is refused at the event level,
  before any node is built;
- at most MAX_DEPTH levels of nesting, checked on the parser's events (the parser is iterative;
  PyYAML's composer is recursive, so 1,000 levels would end in a RecursionError);
- no duplicate keys (YAML says a key is unique; PyYAML silently keeps the last one), named with
  path.
"""

from __future__ import annotations

from typing import Any

import yaml

from device_plugin.core.errors import ConfigError
from device_plugin.core.short_text import one_line, short

MAX_DEPTH = 32
FIELD = "config file"

# libyaml when present (fast, and its parser is iterative too); PyYAML's own otherwise.
_BaseLoader: type = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_MERGE_TAG = "tag:yaml.org,2002:merge"


class _Refused(Exception):
    """Raised inside the loader (which knows no field): a merge key or a duplicate key."""


def load_yaml_text(
    text: str,
    *,
    source: str = "<text>",
    field: str = FIELD,
    kind: str = "YAML/JSON",
    quote: bool = True,
) -> Any:
    """YAML/JSON text as plain values, within the limits above; ConfigError names the path inside
    the document, else `field`. `source` names the text in messages (quoted and cut unless
    quote=False)."""
    named = short(source) if quote else source
    try:
        _check_events(text, field)
        return yaml.load(text, Loader=_StrictLoader)
    except _Refused as refused:
        raise ConfigError(field, str(refused)) from None
    except yaml.MarkedYAMLError as error:
        mark = error.problem_mark
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        problem = error.problem or error.context or "invalid"
        raise ConfigError(
            field, f"{named} is not valid {kind}: {one_line(problem, 120)}{where}"
        ) from None
    except yaml.YAMLError as error:
        raise ConfigError(
            field, f"{named} is not valid {kind}: {one_line(str(error), 120)}"
        ) from None


class _Level:
    """One open mapping or sequence while walking the events: its path and what comes next."""

    def __init__(self, path: str, is_mapping: bool) -> None:
        self.path = path
        self.is_mapping = is_mapping
        self.keys: set[str] = set()
        # mapping: the key whose value comes next; None: a key comes next
        self.key: str | None = None
        self.index = 0  # sequence: the position of the next item


def _check_events(text: str, field: str) -> None:
    """Refuse anchors, aliases, merge keys, complex keys, duplicate keys and deep nesting, in one
    pass."""
    stack: list[_Level] = []
    for event in yaml.parse(text, Loader=_BaseLoader):
        if isinstance(event, yaml.MappingEndEvent | yaml.SequenceEndEvent):
            stack.pop()
            _done(stack)
            continue
        if not isinstance(event, yaml.NodeEvent):
            continue  # stream and document boundaries
        parent = stack[-1] if stack else None
        if parent is not None and parent.is_mapping and parent.key is None:
            _take_key(parent, event, field)
            continue
        path = _child_path(parent)
        if isinstance(event, yaml.AliasEvent) or event.anchor is not None:
            raise ConfigError(
                path or field,
                "YAML anchors and aliases (&, *) are not accepted; write the value out",
            )
        if isinstance(event, yaml.ScalarEvent):
            _done(stack)
            continue
        if len(stack) >= MAX_DEPTH:
            raise ConfigError(path or field, f"nested deeper than {MAX_DEPTH} levels")
        stack.append(_Level(path, isinstance(event, yaml.MappingStartEvent)))


def _take_key(level: _Level, event: yaml.Event, field: str) -> None:
    where = level.path or field
    if isinstance(event, yaml.AliasEvent) or getattr(event, "anchor", None) is not None:
        raise ConfigError(
            where, "YAML anchors and aliases (&, *) are not accepted; write the value out"
        )
    if not isinstance(event, yaml.ScalarEvent):
        raise ConfigError(where, "a key must be a plain string, not a list or a mapping")
    if event.value == "<<" and event.implicit[0]:
        raise ConfigError(where, "YAML merge keys (<<) are not accepted; write the keys out")
    if event.value in level.keys:
        raise ConfigError(_join(level.path, event.value), f"duplicate key {short(event.value)}")
    level.keys.add(event.value)
    level.key = event.value


def _child_path(parent: _Level | None) -> str:
    if parent is None:
        return ""
    if parent.is_mapping:
        return _join(parent.path, parent.key or "")
    return f"{parent.path}[{parent.index}]"


def _join(path: str, key: str) -> str:
    key = one_line(key, 40)
    return f"{path}.{key}" if path else key


def _done(stack: list[_Level]) -> None:
    """A node ended: its parent moves on to its next key or item."""
    if not stack:
        return
    parent = stack[-1]
    if parent.is_mapping:
        parent.key = None
    else:
        parent.index += 1


class _StrictLoader(_BaseLoader):  # type: ignore[misc, valid-type]
    """Safe loading plus a second duplicate check on the built keys (`1` and `01` are the same
    key)."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: set[Any] = set()
        for key_node, _ in node.value:
            if key_node.tag == _MERGE_TAG:
                raise _Refused("YAML merge keys (<<) are not accepted; write the keys out")
            key = self.construct_object(key_node, deep=deep)
            try:
                duplicate = key in seen
            except TypeError:  # an unhashable key: SafeConstructor says so with the line below
                break
            if duplicate:
                line = key_node.start_mark.line + 1
                raise _Refused(f"duplicate key {short(key)} at line {line}")
            seen.add(key)
        return super().construct_mapping(node, deep=deep)  # type: ignore[no-any-return]
