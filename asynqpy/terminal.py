"""Text bound for a terminal: control characters shown as visible escapes, so data cannot drive the terminal.

A queue name, task type, user name or error message comes from whoever wrote it to Redis or sent it to the
dashboard; printed raw, ``ESC [2J`` clears the screen, ``OSC 0`` retitles the window and ``OSC 52`` writes the
clipboard. Every line a CLI command prints goes through ``printable()`` (``say()`` prints through it); the
JSON output needs no more than this either (json.dumps escapes C0 controls, and the ``\\u00XX`` form used here
for the rest is valid inside a JSON string).
"""

from __future__ import annotations

import re
import sys
from typing import TextIO

# C0 controls but newline and tab, DEL, C1 controls (0x9b is a one-byte CSI to some terminals), and the
# Unicode bidi controls that reorder what is shown (a "Trojan Source" line).
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def _escape(m: re.Match[str]) -> str:
    return f"\\u{ord(m.group()):04x}"


def printable(text: str) -> str:
    """text with every control character but newline and tab replaced by its \\uXXXX escape."""
    return _CONTROL.sub(_escape, text)


def say(text: str = "", *, file: TextIO | None = None, end: str = "\n", flush: bool = False) -> None:
    """print(printable(text)): the one way a CLI command writes a line for people."""
    print(printable(text), file=file or sys.stdout, end=end, flush=flush)
