"""Whole-number query parameters (?page=, ?size=, ?hpage=, ?cursor=) read one way on every page: absent is the
default; anything else must be a whole number within bounds, else ValueError (a 400 page saying which parameter
and what it takes), never a silent fallback or clamp."""

from __future__ import annotations

from flask import request


def whole(name: str, default: int, *, minimum: int = 0, maximum: int | None = None) -> int:
    """?name= as an int in [minimum, maximum]; default when absent or blank. Raises ValueError otherwise."""
    raw = request.args.get(name, "").strip()
    if not raw:
        return default
    bounds = f"{minimum} or more" if maximum is None else f"from {minimum} to {maximum}"
    try:
        value = int(raw, 10)
    except ValueError:
        raise ValueError(f"{name} must be a whole number {bounds}, not {raw[:40]!r}") from None
    if value < minimum or (maximum is not None and value > maximum):
        raise ValueError(f"{name} must be a whole number {bounds}, not {value}")
    return value
