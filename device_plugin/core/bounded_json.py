"""JSON files read with the config reader's limits: our own state files (the DRA checkpoint), not
config.

Boundary: a path in, plain JSON values out (or ConfigError naming the file). The bytes come from
core/bounded_file.py, the one bounded reader (a regular file only, O_NONBLOCK, a size cap), so a
FIFO or a symlink to /dev/zero is refused at once. The depth is capped at bounded_yaml.MAX_DEPTH:
CPython's JSON decoder recurses, and `[` x 100,000 ends in a RecursionError inside it (cleanly,
before the C stack is at risk), which is reported here as "nested too deep"; anything that did parse
is walked once, without recursion, against the cap. JSON rather than YAML: the checkpoint is read at
start, one small file per claim, and the YAML path costs ~40 times as much per file (16 s for 10,000
claims).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from device_plugin.core.bounded_file import read_regular_file
from device_plugin.core.bounded_yaml import MAX_DEPTH
from device_plugin.core.errors import ConfigError
from device_plugin.core.short_text import one_line, short_path


def load_json_file(path: Path, *, limit: int, field: str, max_depth: int = MAX_DEPTH) -> Any:
    """The JSON value in `path` (at most `limit` bytes, nested at most `max_depth` levels)."""
    data = read_regular_file(path, limit=limit, field=field)
    try:
        value = json.loads(data.decode("utf-8"))
    except UnicodeDecodeError as error:
        where = f"{short_path(path)} is not UTF-8 text"
        raise ConfigError(field, f"{where}: {error.reason} at byte {error.start}") from None
    except RecursionError:
        raise ConfigError(
            field, f"{short_path(path)} is nested deeper than {max_depth} levels"
        ) from None
    except ValueError as error:
        raise ConfigError(
            field, f"{short_path(path)} is not valid JSON: {one_line(str(error), 120)}"
        ) from None
    if _depth_exceeds(value, max_depth):
        raise ConfigError(field, f"{short_path(path)} is nested deeper than {max_depth} levels")
    return value


def _depth_exceeds(value: Any, max_depth: int) -> bool:
    """Whether lists/objects nest deeper than `max_depth` (a scalar at the top is depth 0)."""
    stack = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        children = (
            item.values() if isinstance(item, dict) else item if isinstance(item, list) else None
        )
        if children is None:
            continue
        if depth + 1 > max_depth:
            return True
        stack.extend((child, depth + 1) for child in children)
    return False
