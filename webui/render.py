"""Rendering in one place: full page or htmx partial from one helper, error pages, and the template filters."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any
from urllib.parse import quote

from flask import Flask, current_app, render_template, request
from markupsafe import Markup

from asynqpy.errors import RedisCommandError, RedisUnavailableError
from asynqpy.terminal import printable
from inspector import bounds
from inspector.display import span
from inspector.textout import size as human_size

STATES = ("active", "pending", "aggregating", "scheduled", "retry", "archived", "completed")


def is_htmx() -> bool:
    return request.headers.get("HX-Request") == "true" and request.headers.get("HX-History-Restore-Request") != "true"


def page(template: str, partial: str | None = None, *, status: int = 200, **ctx: Any) -> tuple[str, int]:
    """The full page, or (for an htmx request) only its partial; both get the same context."""
    name = partial if partial and is_htmx() else template
    return render_template(name, **ctx), status


def error_page(exc: BaseException, status: int) -> tuple[str, int, dict[str, str]]:
    """A page (or, for htmx, a message in #messages) saying what went wrong, never a traceback. Redis trouble
    that passes (RedisUnavailableError) is the Redis-down banner; a command Redis refused (RedisCommandError)
    says so with Redis's message."""
    down = isinstance(exc, RedisUnavailableError)
    kind = "error redis-down" if down else "error"  # static/app.js clears a redis-down message once Redis answers
    if status == 404:
        title = "Not found"
        text = str(exc) if not hasattr(exc, "description") else "There is nothing at this address."
        if getattr(exc, "description", None) not in (None, getattr(type(exc), "description", None)):
            text = str(exc.description)  # type: ignore[attr-defined]  # abort(404, description=...)
    elif status == 405:
        title, text = "Method not allowed", "This address does not take that kind of request."
    elif status == 414:
        title = "Address too long"
        text = (f"The dashboard does not read addresses this long ({getattr(exc, 'description', None) or exc}). "
                "Shorten the search or the filters in it, or start again from the queues.")
    elif down:
        title, text = "Redis is unavailable", str(exc).removeprefix("Redis is unavailable: ")
    elif isinstance(exc, RedisCommandError):
        title, text = "Redis refused a command", f"Redis at {exc.url} answered: {exc.reason}"
    elif status >= 500:
        title, text = "Something went wrong", "The error was logged. Try again, or look at the server's log."
    elif status in (401, 403):
        title, text = "Not allowed", getattr(exc, "description", None) or str(exc)
    else:
        title, text = "That did not work", getattr(exc, "description", None) or str(exc)
    headers = {"HX-Retarget": "#messages", "HX-Reswap": "innerHTML"} if is_htmx() else {}
    ctx = {"title": title, "text": text, "status": status, "redis_down": text if down else None}
    name = "partials/_message.html" if is_htmx() else "error.html"
    return render_template(name, kind=kind, message=f"{title}: {text}", **ctx), status, headers


def when(t: datetime | None) -> Markup:
    """A <time> element in UTC; static/app.js adds the viewer's local time and a relative form."""
    if t is None:
        return Markup("-")
    utc = t.astimezone(UTC)
    iso = utc.isoformat(timespec="seconds")
    return Markup('<time datetime="{0}" title="{0}">{1}</time>').format(iso, utc.strftime("%Y-%m-%d %H:%M:%S UTC"))


def ago(t: datetime | None, now: float | None = None) -> str:
    """'3m12s ago' or 'in 45s'."""
    if t is None:
        return "-"
    delta = t.timestamp() - (now if now is not None else datetime.now(UTC).timestamp())
    return f"in {span(delta)}" if delta > 0 else f"{span(delta)} ago"


def percent(part: int, whole: int) -> str:
    return f"{100 * part / whole:.1f}%" if whole else "0.0%"


def name(text: object) -> str:
    """Producer- or user-supplied text as shown: control characters and the Unicode bidi controls (U+202E and
    the like, which would show "...rtl" as "...ltr") written as visible \\uXXXX escapes, as the CLI writes them
    (asynqpy.terminal.printable). Every filter below that shows a name, type, id or text goes through it."""
    return printable(text if isinstance(text, str) else "" if text is None else str(text))


def clip(text: object, limit: int = bounds.CELL) -> str:
    """bounds.clip, shown through name(): |clip in a list, |clip(FULL) on its page."""
    return name(bounds.clip(text, limit))


def short(text: object) -> Markup:
    """A queue name or task type for a list: cut to bounds.NAME characters, with the name (up to a list
    cell's bounds.CELL) on hover when cut; never wrapped mid-word (static/app.css: td.type, .name)."""
    full = text if isinstance(text, str) else "" if text is None else str(text)
    if not bounds.clipped(full, bounds.NAME):
        return Markup("{0}").format(name(full))
    return Markup('<span class="name cut" title="{0}">{1}</span>').format(clip(full), name(bounds.name(full)))


def plural(n: int, noun: str, nouns: str | None = None) -> str:
    """'1 pending task', '2 pending tasks' (nouns: an irregular plural)."""
    return f"{n} {noun if n == 1 else nouns or noun + 's'}"


def here(query: bool = True) -> str:
    """This request's address for a live refresh to ask again: the prefix, the path percent-encoded as the
    browser sent it (request.path is decoded: a '%', '#' or bidi control in a queue name must not go back raw)
    and, with query, the query string."""
    path = request.script_root + quote(request.path, safe="/~!$&'()*+,;=:@")
    qs = request.query_string.decode("latin-1") if query else ""
    return path + (f"?{qs}" if qs else "")


def init_app(app: Flask) -> None:
    app.jinja_env.filters.update(when=when, ago=ago, span=span, size=human_size, percent=percent, plural=plural,
                                 short=short, clip=clip, name=name)
    app.jinja_env.globals.update(STATES=STATES, here=here,
                                 poll_seconds=lambda: current_app.config["ASYNQPY_POLL_SECONDS"])
