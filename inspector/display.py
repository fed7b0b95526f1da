"""Display forms: payload and result bytes as bounded pretty JSON, printable text or hex; durations as 3m12s."""

from __future__ import annotations

import json
from typing import Literal

from asynqpy import typed
from asynqpy.options import check_int
from inspector.models import PayloadView

DEFAULT_LIMIT = 64 * 1024
PREVIEW_LIMIT = 200

Kind = Literal["empty", "json", "text", "hex", "call"]


def _printable(text: str) -> bool:
    return all(ch.isprintable() or ch in "\n\r\t" for ch in text)


def _cut(text: str, limit: int) -> tuple[str, bool]:
    if len(text) <= limit:
        return text, False
    return text[:limit], True


def view(data: bytes | None, *, limit: int = DEFAULT_LIMIT, pretty: bool = True,
         task_type: str = "") -> PayloadView:
    """The display form of data, cut at about limit characters.

    The payload of a task type registered in this process as a typed task (asynqpy.typed) is shown as the
    call it stands for, `send_welcome(to='ada@example.com')` (kind "call"). Other UTF-8 JSON is shown
    pretty-printed (compact when pretty is False), other printable UTF-8 as text, anything else as hex.
    size is always the full size in bytes. Raises InvalidArgumentError for a limit < 1.
    """
    check_int(limit, "limit", minimum=1)
    raw = bytes(data or b"")
    if not raw:
        return PayloadView("empty", "", 0, False)
    call = typed.describe(task_type, raw, pretty=pretty) if task_type else None
    if call is not None:
        cut, truncated = _cut(call, limit)
        return PayloadView("call", cut, len(raw), truncated)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        return _hex(raw, limit)
    shown = _json(text, pretty)
    if shown is not None:
        cut, truncated = _cut(shown, limit)
        return PayloadView("json", cut, len(raw), truncated)
    if _printable(text):
        cut, truncated = _cut(text, limit)
        return PayloadView("text", cut, len(raw), truncated)
    return _hex(raw, limit)


def _json(text: str, pretty: bool) -> str | None:
    stripped = text.strip()
    if not stripped or stripped[0] not in '{["':
        return None  # bare numbers and words read better as text
    try:
        obj = json.loads(stripped)
    except (ValueError, RecursionError):
        return None
    if pretty:
        return json.dumps(obj, indent=2, ensure_ascii=False, sort_keys=False)
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":"))


def _hex(raw: bytes, limit: int) -> PayloadView:
    part = raw[: max(1, limit // 3)]  # 'xx ' per byte
    return PayloadView("hex", part.hex(" "), len(raw), len(part) < len(raw))


def preview(data: bytes | None, limit: int = PREVIEW_LIMIT, *, task_type: str = "") -> PayloadView:
    """A one-line form for table cells: the call, compact JSON or text with newlines shown as spaces."""
    v = view(data, limit=limit, pretty=False, task_type=task_type)
    if v.kind == "text":
        return PayloadView(v.kind, " ".join(v.text.split()), v.size, v.truncated)
    return v


def span(seconds: float) -> str:
    """A duration like 45s, 3m12s, 2h5m, 4d3h."""
    s = int(abs(seconds))
    if s >= 86400:
        return f"{s // 86400}d{s % 86400 // 3600}h"
    if s >= 3600:
        return f"{s // 3600}h{s % 3600 // 60}m"
    if s >= 60:
        return f"{s // 60}m{s % 60}s"
    return f"{s}s"
