"""Unicode bidi controls (U+202E RIGHT-TO-LEFT OVERRIDE and the like) in a queue name, task type, task id or
group are shown as visible escapes (\\u202e), as the CLI shows them, never raw: "invoice\\u202efdp.exe" must not
display as "invoiceexe.pdf"."""

from __future__ import annotations

from html.parser import HTMLParser
from typing import Any

from flask.testing import FlaskClient

from asynqpy import Client, Task

RLO = "\u202e"
QUEUE = f"mail{RLO}ltr"
TYPE = f"invoice{RLO}fdp.exe"
TASK_ID = f"id{RLO}gnp"
GROUP = f"grp{RLO}x"


SHOWN_ATTRS = ("title", "aria-label", "hx-confirm", "data-confirm", "placeholder", "alt")


class Shown(HTMLParser):
    """What a page shows: its text and the attributes a browser displays (tooltips, labels, confirmations); not
    the form values and ids it posts back, which must stay the names themselves."""

    def __init__(self, html: str) -> None:
        super().__init__()
        self.parts: list[str] = []
        self.feed(html)

    def handle_data(self, data: str) -> None:
        self.parts.append(data)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.parts += [v or "" for k, v in attrs if k in SHOWN_ATTRS]

    def text(self) -> str:
        return " ".join(self.parts)


def test_the_name_filters_escape_bidi_controls_visibly() -> None:
    from webui.render import clip, name, short

    assert name(f"a{RLO}b\u2066c\u200fd") == "a\\u202eb\\u2066c\\u200fd"
    assert clip(TYPE) == "invoice\\u202efdp.exe"
    assert str(short(TYPE)) == "invoice\\u202efdp.exe"
    assert RLO not in str(short(TYPE * 20)) and "\\u202e" in str(short(TYPE * 20))
    assert name("plain ünïcødé\ttab") == "plain ünïcødé\ttab"


def test_no_page_shows_a_bidi_control_raw(as_role: Any, redis_url: str) -> None:
    with Client(redis_url) as c:
        c.enqueue(Task(TYPE, b"{}"), queue=QUEUE, task_id=TASK_ID)
        c.enqueue(Task(TYPE, b"{}"), queue=QUEUE, group=GROUP)
    client: FlaskClient = as_role("admin")
    from webui.queuenames import encode

    q = encode(QUEUE)
    for path in ("/", f"/queues/{q}/pending", f"/queues/{q}/aggregating", f"/queues/{q}/tasks/{encode(TASK_ID)}"):
        resp = client.get(path)
        shown = Shown(resp.get_data(as_text=True)).text()
        assert resp.status_code == 200, path
        assert RLO not in shown, path
        assert "mail\\u202eltr" in shown, path
    task = client.get(f"/queues/{q}/tasks/{encode(TASK_ID)}").get_data(as_text=True)
    assert "id\\u202egnp" in task and "invoice\\u202efdp.exe" in task
    assert "grp\\u202ex" in client.get(f"/queues/{q}/aggregating").get_data(as_text=True)
