"""Bounded, one-line renderings of values that come from outside (config values, keys, request IDs).

Boundary: pure text. Error messages and log lines quote what an operator or a client sent; a hostile
or broken input (a megabyte string, a deeply nested or self-sharing structure, 10,000 device IDs
from any local client of the plugin socket) must never make the message itself huge or slow to
build. `short` renders a value with reprlib's per-level limits, so the work is bounded before the
text is cut; `one_line` cuts text that is already built; `bounded_ids` shows the first few IDs of a
list and how many were left out; `bounded_text` caps a whole message (a gRPC status).
"""

from __future__ import annotations

import reprlib
from collections.abc import Iterable
from typing import Any

SHORT_LIMIT = 60  # characters of a quoted value in a message
SHOWN_IDS = 5  # IDs a message lists before "… (N more)"
MAX_MESSAGE_CHARS = 1024  # a whole status message
ELLIPSIS = "…"

_REPR = reprlib.Repr()
# Bounded work, whatever the value: at most a few items per level and a few levels.
_REPR.maxlevel = 3
_REPR.maxdict = _REPR.maxlist = _REPR.maxtuple = _REPR.maxset = _REPR.maxfrozenset = 4
_REPR.maxstring = _REPR.maxother = _REPR.maxlong = SHORT_LIMIT


def one_line(text: str, limit: int = SHORT_LIMIT) -> str:
    """`text` on one line (line breaks and other controls shown escaped), at most `limit`
    characters."""
    if len(text) <= limit and text.isprintable():  # the usual case (a name, a message), at C speed
        return text
    # never scan more than needed: escapes at most quadruple a character
    head = text[: limit * 4 + 1]
    flat = "".join(c if c.isprintable() else repr(c)[1:-1] for c in head)
    if len(flat) > limit or len(text) > len(head):
        return flat[: max(0, limit - len(ELLIPSIS))] + ELLIPSIS
    return flat


def short(value: Any, limit: int = SHORT_LIMIT) -> str:
    """repr(value), bounded in both the work done and the length (`limit` characters with the
    ellipsis)."""
    if isinstance(value, str):
        # repr of a cut string: the quotes show where the value starts; the ellipsis says it went
        # on.
        text = repr(value[:limit])
        return text if len(value) <= limit and len(text) <= limit else one_line(text, limit)
    return one_line(_REPR.repr(value), limit)


def short_path(path: object, limit: int = 2 * SHORT_LIMIT) -> str:
    """A path for a message: its end is what tells files apart, so a long one keeps its tail."""
    text = str(path)
    if len(text) <= limit and text.isprintable():
        return text
    tail = "".join(c if c.isprintable() else repr(c)[1:-1] for c in text[-limit:])
    return (
        ELLIPSIS + tail[-(limit - len(ELLIPSIS)) :]
        if len(tail) > limit or len(text) > limit
        else tail
    )


def bounded_ids(ids: Iterable[str], shown: int = SHOWN_IDS) -> str:
    """'a, b, c' for short lists; 'a, b, c, d, e … (9995 more)' for long ones (each ID cut too)."""
    items = list(ids)
    head = ", ".join(bounded_text(i, 80) for i in items[:shown])
    rest = len(items) - shown
    return f"{head} … ({rest} more)" if rest > 0 else head


def bounded_text(text: str, limit: int = MAX_MESSAGE_CHARS) -> str:
    """`text` cut to about `limit` characters, saying how many were left out."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}… ({len(text) - limit} more characters)"


def counted(number: int, noun: str) -> str:
    """'1 GPU', '2 GPUs': a count with its noun, plural by an 's' (every noun the messages count
    takes one)."""
    return f"{number} {noun}{'' if number == 1 else 's'}"
