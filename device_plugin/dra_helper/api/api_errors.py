"""What the API server's failures are: an answer other than 2xx, no answer, one too big; and which
are an outage.

Boundary: the error types transport.py raises and their meaning; no I/O.
"""

from __future__ import annotations

import json

from device_plugin.core.short_text import one_line


class ApiUnreachable(RuntimeError):
    """No answer: the server could not be reached, did not answer in time, or no token/TLS could be
    set up."""


class AnswerTooBig(RuntimeError):
    """The answer passes the bound its caller set (a broken server or proxy, a gzip bomb)."""


class ApiError(RuntimeError):
    """The API server answered with a status other than 2xx; `body` is its answer (a Status,
    usually)."""

    def __init__(self, status: int, reason: str, body: bytes = b"", what: str = "") -> None:
        self.status, self.reason, self.body = status, reason, body
        super().__init__(
            one_line(f"HTTP {status} {reason}{f' ({what})' if what else ''}{_said(body)}", 600)
        )

    def message(self) -> str:
        """The `message` of the Status it carries, else its reason; one line, bounded."""
        return _said(body=self.body).removeprefix(": ") or one_line(self.reason, 300)


def is_transient(error: Exception) -> bool:
    """Worth retrying: the server is unreachable, overloaded or failing (not: the request is
    wrong)."""
    if isinstance(error, ApiError):
        return error.status == 429 or error.status >= 500
    # No answer (refused, reset, timed out, no token). Anything else (a conflict loop, a bug of
    # ours) is no outage.
    return isinstance(error, ApiUnreachable | OSError)


def _said(body: bytes) -> str:
    """': <message>' of the Status in an error answer, '' when it has none."""
    try:
        message = json.loads(body).get("message") if body else None
    except (ValueError, AttributeError):
        message = None
    return f": {one_line(message, 300)}" if isinstance(message, str) and message else ""
