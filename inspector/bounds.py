"""How much of a producer-supplied text is shown, so one absurd value (a 1 MB task type, error or header) cannot
hang a browser or flood a terminal: a short clip in every list cell, a larger one on a task's own page.

For the dashboard's `clip` filter and the CLI's tables: ``clip(text)`` for a cell, ``clip(text, FULL)`` for a
value shown on its own. The payload and result are cut by the Inspector already (TaskView.payload.truncated).
"""

from __future__ import annotations

NAME = 60  # characters of a queue name or task type in a table column (the full name on hover, or with --json)
CELL = 160  # characters of a type, queue, payload, error, result or header value in a list cell
FULL = 16 * 1024  # characters of such a value on the task's own page
MARK = "…"


def clip(text: object, limit: int = CELL) -> str:
    """text (str() of it) cut to at most limit characters, the last one a "…" when anything was cut."""
    s = text if isinstance(text, str) else "" if text is None else str(text)
    return s if len(s) <= limit else s[:max(0, limit - 1)] + MARK


def clipped(text: object, limit: int = CELL) -> bool:
    """Whether clip(text, limit) cuts anything."""
    s = text if isinstance(text, str) else "" if text is None else str(text)
    return len(s) > limit


def name(text: object) -> str:
    """A queue name or task type cut for a table column (NAME characters, "…" when cut)."""
    return clip(text, NAME)
