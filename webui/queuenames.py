"""Queue names in URLs: any name Go asynq accepts (slashes, braces, spaces, any Unicode, "..") as one path
segment. WSGI servers decode %2F before routing, so '/' is written ~2F (and '~' itself ~7E, and a name of dots
~2E, which browsers would otherwise resolve away); everything else is percent-encoded as usual.

Blueprints with queue routes call ``bp.record_once(queuenames.register)`` before their routes and write
``<queue:queue>``.
"""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import quote

from werkzeug.routing import BaseConverter

_ESCAPED = re.compile("~(2F|7E|2E)")


class QueueConverter(BaseConverter):
    """A queue name in one path segment (see the module's docstring)."""

    def to_python(self, value: str) -> str:
        return _ESCAPED.sub(lambda m: chr(int(m.group(1), 16)), value)

    def to_url(self, value: Any) -> str:
        text = str(value).replace("~", "~7E").replace("/", "~2F")
        if text.strip(".") == "":
            text = text.replace(".", "~2E")
        return quote(text, safe="!$&'()*+,:;=@")


def register(state: Any) -> None:
    """For Blueprint.record_once: make <queue:...> known to the app's URL map."""
    state.app.url_map.converters["queue"] = QueueConverter
