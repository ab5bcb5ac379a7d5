"""Decimal numbers as operators type them: ASCII digits only.

Python's str.isdigit() is true for a superscript two (which int() then refuses with a ValueError: a
traceback where a config error belongs), and int() and float() read Arabic-Indic or fullwidth digits
(U+0660, U+FF11) as numbers. A config value, an environment variable, an ID or a sysfs field is a
number here only when it is written in ASCII, checked in this one place.
"""

from __future__ import annotations


def is_ascii_digits(text: str) -> bool:
    """True for a non-empty run of 0-9 and nothing else (no sign, space, underscore or other
    script's digit)."""
    return text.isascii() and text.isdigit()


def is_ascii_text(text: str) -> bool:
    """True when `text` may go to float(): float() checks the form, this keeps other scripts' digits
    out."""
    return text.isascii()
