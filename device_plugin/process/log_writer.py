"""Log lines written by a writer thread, so a log call on an RPC path costs a queue put, not a
write.

The daemon logs one INFO line per GetPreferredAllocation decision; formatting its timestamp and
writing it to stderr cost about as much as the whole allocation. `in_background(handler)` returns a
handler that renders the message at once (its arguments may change later) and queues the record;
one thread formats and writes it with `handler`. Queued lines are written at exit (atexit), and
exc_info stays on the record, so text and JSON formatters render tracebacks as before. A message
longer than MAX_MESSAGE_CHARS is cut there, saying how much was left out: whatever a message quotes
(an API server's answer, a client's claim name), one log line stays readable and cheap to write.
"""

from __future__ import annotations

import atexit
import logging
import logging.handlers
import queue
import threading

from device_plugin.core.short_text import bounded_text

_lock = threading.Lock()
_listener: logging.handlers.QueueListener | None = None


MAX_MESSAGE_CHARS = 8 * 1024


class _RenderingQueueHandler(logging.handlers.QueueHandler):
    def prepare(self, record: logging.LogRecord) -> logging.LogRecord:
        record.msg, record.args = bounded_text(record.getMessage(), MAX_MESSAGE_CHARS), None
        return record


def in_background(handler: logging.Handler) -> logging.Handler:
    """A handler that queues records for `handler` on the writer thread (replacing an earlier
    one)."""
    global _listener
    records: queue.SimpleQueue[logging.LogRecord] = queue.SimpleQueue()
    with _lock:
        if _listener is not None:
            _listener.stop()
        _listener = logging.handlers.QueueListener(records, handler)
        _listener.start()
    return _RenderingQueueHandler(records)


def flush() -> None:
    """Write every queued line and stop the writer (at exit; later records are queued, not
    written)."""
    global _listener
    with _lock:
        if _listener is not None:
            _listener.stop()
            _listener = None


atexit.register(flush)
