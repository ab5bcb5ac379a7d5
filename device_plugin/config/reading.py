"""Read the config file with limits, so a hostile or broken ConfigMap is refused fast and never hangs us.

Boundary: a path in, a plain mapping out (or ConfigError); what the keys mean is config.py's job.
Limits, each reproduced by tests/adversarial/test_config_file_limits.py:
- a regular file only, opened with O_NONBLOCK and checked with fstat before any read: a FIFO or a
  device (/dev/zero) at the path is refused at once instead of blocking or filling memory;
- at most MAX_CONFIG_BYTES (a ConfigMap holds at most 1 MiB), read as at most that plus one byte;
- no anchors, aliases or merge keys: an alias "bomb" of a few hundred bytes expands to gigabytes
  once anything walks it (a log line, an error message), so it is refused at the event level,
  before any node is built;
- at most MAX_DEPTH levels of nesting, checked on the parser's events (the parser is iterative;
  PyYAML's composer is recursive, so 1,000 levels would end in a RecursionError);
- no duplicate keys (YAML says a key is unique; PyYAML silently keeps the last one), named with path.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Any

import yaml

from device_plugin.core.errors import ConfigError
from device_plugin.core.short_text import one_line, short, short_path

MAX_CONFIG_BYTES = 1024 * 1024
MAX_DEPTH = 32
FIELD = "config file"

# libyaml when present (fast, and its parser is iterative too); PyYAML's own otherwise.
_BaseLoader: type = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_MERGE_TAG = "tag:yaml.org,2002:merge"


def read_regular_file(path: Path, *, limit: int = MAX_CONFIG_BYTES, field: str = FIELD) -> bytes:
    """The bytes of a regular file of at most `limit` bytes; ConfigError otherwise, without blocking."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOCTTY)
    except OSError as error:
        raise ConfigError(field, f"cannot read {short_path(path)}: {error.strerror}") from error
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise ConfigError(field, f"{short_path(path)} is {_kind(mode)}, not a regular file")
        chunks: list[bytes] = []
        left = limit + 1  # one byte more tells "exactly the limit" from "over it"
        while left > 0:
            chunk = os.read(fd, min(left, 256 * 1024))
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
    except OSError as error:
        raise ConfigError(field, f"cannot read {short_path(path)}: {error.strerror}") from error
    finally:
        os.close(fd)
    data = b"".join(chunks)
    if len(data) > limit:
        hint = " (a ConfigMap holds at most 1 MiB)" if limit == MAX_CONFIG_BYTES else ""
        raise ConfigError(field, f"{short_path(path)} is larger than {limit} bytes{hint}")
    return data


def _kind(mode: int) -> str:
    for test, name in (
        (stat.S_ISDIR, "a directory"),
        (stat.S_ISFIFO, "a FIFO"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISSOCK, "a socket"),
    ):
        if test(mode):
            return name
    return "not a regular file"


def load_config_file(path: Path) -> dict[str, Any]:
    """The file's top-level mapping ({} for an empty file)."""
    data = read_regular_file(path)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        where = f"{short_path(path)} is not UTF-8 text"
        raise ConfigError(FIELD, f"{where}: {error.reason} at byte {error.start}") from error
    raw = load_yaml_text(text, source=str(path))
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raise ConfigError(FIELD, f"{short_path(path)} must hold a mapping at the top level")
    return raw


def load_yaml_text(text: str, *, source: str = "<text>") -> Any:
    """YAML/JSON text as plain values, within the limits above; ConfigError names the path inside."""
    try:
        _check_events(text)
        return yaml.load(text, Loader=_StrictLoader)
    except yaml.MarkedYAMLError as error:
        mark = error.problem_mark
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        problem = error.problem or error.context or "invalid"
        raise ConfigError(FIELD, f"{short(source)} is not valid YAML/JSON: {one_line(problem, 120)}{where}") from None
    except yaml.YAMLError as error:
        raise ConfigError(FIELD, f"{short(source)} is not valid YAML/JSON: {one_line(str(error), 120)}") from None


class _Level:
    """One open mapping or sequence while walking the events: its path and what comes next."""

    def __init__(self, path: str, is_mapping: bool) -> None:
        self.path = path
        self.is_mapping = is_mapping
        self.keys: set[str] = set()
        self.key: str | None = None  # mapping: the key whose value comes next; None: a key comes next
        self.index = 0  # sequence: the position of the next item


def _check_events(text: str) -> None:
    """Refuse anchors, aliases, merge keys, complex keys, duplicate keys and deep nesting, in one pass."""
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
            _take_key(parent, event)
            continue
        path = _child_path(parent)
        if isinstance(event, yaml.AliasEvent) or event.anchor is not None:
            raise ConfigError(path or FIELD, "YAML anchors and aliases (&, *) are not accepted; write the value out")
        if isinstance(event, yaml.ScalarEvent):
            _done(stack)
            continue
        if len(stack) >= MAX_DEPTH:
            raise ConfigError(path or FIELD, f"nested deeper than {MAX_DEPTH} levels")
        stack.append(_Level(path, isinstance(event, yaml.MappingStartEvent)))


def _take_key(level: _Level, event: yaml.Event) -> None:
    where = level.path or FIELD
    if isinstance(event, yaml.AliasEvent) or getattr(event, "anchor", None) is not None:
        raise ConfigError(where, "YAML anchors and aliases (&, *) are not accepted; write the value out")
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
    """Safe loading plus a second duplicate check on the built keys (`1` and `01` are the same key)."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: set[Any] = set()
        for key_node, _ in node.value:
            if key_node.tag == _MERGE_TAG:
                raise ConfigError(FIELD, "YAML merge keys (<<) are not accepted; write the keys out")
            key = self.construct_object(key_node, deep=deep)
            try:
                duplicate = key in seen
            except TypeError:  # an unhashable key: SafeConstructor says so with the line below
                break
            if duplicate:
                line = key_node.start_mark.line + 1
                raise ConfigError(FIELD, f"duplicate key {short(key)} at line {line}")
            seen.add(key)
        return super().construct_mapping(node, deep=deep)  # type: ignore[no-any-return]
