"""One log line stays bounded, whatever its message quotes (an API server's 1 MiB answer, a client's name).

On main 67e3c9c a 1 MiB claim name or API error body was written whole into one log line.
"""

from __future__ import annotations

import logging
import threading

import pytest

from device_plugin.process.log_writer import MAX_MESSAGE_CHARS, flush, in_background


class _Kept(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.lines: list[str] = []
        self.written = threading.Event()

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(self.format(record))
        self.written.set()


@pytest.mark.parametrize(
    ("message", "args"),
    [("%s", ("x" * (1024 * 1024),)), ("y" * (1024 * 1024), ()), ("short %s", ("z",))],
    ids=["1-MiB-argument", "1-MiB-message", "short-message-untouched"],
)
def test_a_log_message_is_cut_to_the_limit_saying_how_much_was_left_out(message: str, args: tuple[str, ...]) -> None:
    kept = _Kept()
    logger = logging.getLogger("tests.log_line_bounds")
    handler = in_background(kept)
    logger.addHandler(handler)
    logger.propagate = False
    try:
        logger.warning(message, *args)
        assert kept.written.wait(10.0)
    finally:
        logger.removeHandler(handler)
        flush()
    (line,) = kept.lines
    full = message % args if args else message
    if len(full) <= MAX_MESSAGE_CHARS:
        assert line == full
    else:
        assert len(line) <= MAX_MESSAGE_CHARS + 64 and line.endswith(
            f"({len(full) - MAX_MESSAGE_CHARS} more characters)"
        )
