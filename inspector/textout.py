"""Output for the CLI: aligned text tables, short times and sizes, and JSON for any Inspector result.

Every cell and value is made printable (asynqpy.terminal): data from Redis never reaches the terminal raw."""

from __future__ import annotations

import base64
import dataclasses
import enum
import json
from collections.abc import Mapping, Sequence
from datetime import date, datetime
from typing import Any

from asynqpy.terminal import printable
from inspector.display import span


def jsonable(obj: Any) -> Any:
    """A JSON-ready form of an Inspector result: dataclasses and mappings become objects, bytes base64,
    times ISO 8601, enums their value, errors their message."""
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        out = {f.name: jsonable(getattr(obj, f.name)) for f in dataclasses.fields(obj)}
        for name in ("summary", "done"):
            if hasattr(type(obj), name) and isinstance(getattr(type(obj), name), property):
                out[name] = jsonable(getattr(obj, name))
        return out
    if isinstance(obj, enum.Enum):
        return obj.value
    if isinstance(obj, Mapping):
        return {str(k): jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [jsonable(v) for v in obj]
    if isinstance(obj, (bytes, bytearray, memoryview)):
        return base64.b64encode(bytes(obj)).decode()
    if isinstance(obj, (datetime, date)):
        return obj.isoformat()
    if isinstance(obj, BaseException):
        return {"error": type(obj).__name__, "message": str(obj)}
    return obj


def dumps(obj: Any) -> str:
    return json.dumps(jsonable(obj), indent=2, ensure_ascii=False, default=str)


def table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """Columns padded to their widest cell; numbers right-aligned."""
    cells = [[printable(str(h)) for h in headers]] + [[cell(v) for v in row] for row in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    numeric = [all(isinstance(row[i], (int, float)) and not isinstance(row[i], bool) for row in rows) and rows
               for i in range(len(headers))]
    lines = []
    for r in cells:
        parts = [c.rjust(w) if numeric[i] else c.ljust(w) for i, (c, w) in enumerate(zip(r, widths, strict=True))]
        lines.append("  ".join(parts).rstrip())
    return "\n".join(lines)


def cell(v: Any) -> str:
    if v is None:
        return "-"
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, float):
        return f"{v:.1f}"
    if isinstance(v, datetime):
        return v.strftime("%Y-%m-%d %H:%M:%S")
    return printable(" ".join(str(v).split()))


def when(t: datetime | None, now: float) -> str:
    """A time with its distance from now: '2026-01-02 03:04:05 (in 5m0s)'."""
    if t is None:
        return "-"
    d = t.timestamp() - now
    return f"{cell(t)} ({'in ' + span(d) if d >= 0 else span(d) + ' ago'})"


def size(n: int | None) -> str:
    if n is None:
        return "-"
    f = float(n)
    for unit in ("B", "KB", "MB", "GB"):
        if f < 1024 or unit == "GB":
            return f"{f:.0f}{unit}" if unit == "B" else f"{f:.1f}{unit}"
        f /= 1024
    return str(n)  # pragma: no cover


def pairs(items: Sequence[tuple[str, Any]]) -> str:
    """A two-column 'name: value' block."""
    width = max((len(k) for k, _ in items), default=0)
    lines = []
    for k, v in items:
        shown = printable(v) if isinstance(v, str) else cell(v)
        lines.append(f"{k + ':'}{shown}" if shown.startswith("\n") else f"{k + ':':<{width + 1}} {shown}")
    return "\n".join(lines)
