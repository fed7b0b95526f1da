"""Queue names and task ids in URLs: any name Go asynq accepts (slashes, braces, spaces, any Unicode, "..") as
one path segment. WSGI servers decode %2F before routing, so '/' is written ~2F (and '~' itself ~7E, and a name of
dots ~2E, which browsers would otherwise resolve away); everything else is percent-encoded as usual.

Blueprints with queue or task routes call ``bp.record_once(queuenames.register)`` before their routes and write
``<queue:queue>`` and ``<taskid:task_id>``. An address typed with %2F instead of ~2F (decoded to '/' before
routing, so it matches no route) is sent to its ~2F form by ``slash_redirect`` (the app's 404 handler asks it).
"""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import quote, unquote

from flask import Response, redirect, request
from werkzeug.routing import BaseConverter

_ESCAPED = re.compile("~(2F|7E|2E)")


class QueueConverter(BaseConverter):
    """A queue name in one path segment (see the module's docstring)."""

    def to_python(self, value: str) -> str:
        return _ESCAPED.sub(lambda m: chr(int(m.group(1), 16)), value)

    def to_url(self, value: Any) -> str:
        return encode(str(value))


def encode(name: str) -> str:
    """name as one path segment (see the module's docstring)."""
    text = name.replace("~", "~7E").replace("/", "~2F")
    if text.strip(".") == "":
        text = text.replace(".", "~2E")
    return quote(text, safe="!$&'()*+,:;=@")


def register(state: Any) -> None:
    """For Blueprint.record_once: make <queue:...> and <taskid:...> known to the app's URL map."""
    state.app.url_map.converters["queue"] = QueueConverter
    state.app.url_map.converters["taskid"] = QueueConverter


def slash_redirect() -> Response | None:
    """For a GET that matched no route: when the address as sent held %2F (a queue name or task id encoded the
    usual way), a redirect to the same address with each segment written as QueueConverter writes it (the
    route then matches, or it is a 404 anyway); else None."""
    raw = request.environ.get("RAW_URI") or request.environ.get("REQUEST_URI") or ""
    path, _, query = raw.partition("?")
    if request.method not in ("GET", "HEAD") or "%2f" not in path.lower():
        return None
    decoded = unquote(path)
    if decoded == request.script_root + request.path:
        prefix = ""  # the path as sent holds the prefix
    elif decoded == request.path:
        prefix = request.script_root  # a proxy stripped the prefix
    else:
        return None
    fixed = "/".join(encode(unquote(seg)) if seg else "" for seg in path.split("/"))
    resp: Response = redirect(prefix + fixed + (f"?{query}" if query else ""), 308)
    return resp
