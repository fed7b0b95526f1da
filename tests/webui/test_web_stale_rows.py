"""A row's action that fails because the row is stale (its task deleted or moved on by a worker or another user
since the table was drawn), over real HTTP as htmx sends it: the answer keeps its error status and message
(retargeted to #messages) and carries the tab drawn again out of band, so the stale row leaves the table."""

from __future__ import annotations

import html
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from inspector import Inspector
from tests.webui.livekit import Browser, Reply, live_app, signed_in
from tests.webui.webkit import make_state


@pytest.fixture
def site(redis_url: str, users_path: Path) -> Iterator[dict[str, Any]]:
    ids = make_state(redis_url)
    with live_app(redis_url, users_path) as base:
        yield {"otto": signed_in(base, "otto"), "ids": ids, "url": redis_url}


def _row_action(b: Browser, tid: str, action: str, **form: str) -> Reply:
    tok = b.token("/queues/mail/archived")
    return b.open(f"/queues/mail/tasks/{tid}/{action}", {"csrf_token": tok, **form},
                  **{"HX-Request": "true", "X-CSRF-Token": tok})


def _split(reply: Reply) -> tuple[str, str]:
    """The message (what #messages gets) and the out-of-band tab, if any."""
    message, _, oob = reply.text.partition('<section id="queue-body" hx-swap-oob="true"')
    return html.unescape(message), oob


def test_a_row_whose_task_is_gone_or_moved_leaves_the_table_with_the_error(site: dict[str, Any]) -> None:
    b, ids = site["otto"], site["ids"]
    gone, moved, kept = ids["archived"][1], ids["archived"][2], ids["archived"][0]
    page = b.open("/queues/mail/archived").text
    assert all(f'data-task-id="{t}"' in page for t in (gone, moved, kept))
    assert '<input type="hidden" name="state" value="archived">' in page and 'hx-params="csrf_token,state"' in page
    with Inspector(site["url"]) as insp:  # another user deletes one, another replays one, behind this page
        insp.delete_task("mail", gone)
        insp.run_task("mail", moved)

    reply = _row_action(b, gone, "run", state="archived")
    message, oob = _split(reply)
    assert reply.status == 404 and reply.headers["HX-Retarget"] == "#messages"
    assert 'class="message error"' in message and f"no task '{gone}' in queue 'mail'" in message
    assert oob, reply.text[:500]  # the archived tab, drawn again: without the row, with the new count
    assert f'data-task-id="{gone}"' not in oob and f'data-task-id="{kept}"' in oob
    assert re.search(r'aria-selected="true" class="on">Archived <span class="count">1</span>', oob), oob[:3000]

    reply = _row_action(b, moved, "run", state="archived")  # now pending: Run now does not apply
    message, oob = _split(reply)
    assert reply.status == 400 and "does not apply to pending tasks" in message
    assert f'data-task-id="{moved}"' not in oob and f'data-task-id="{kept}"' in oob
    assert re.search(r'>Pending <span class="count">2</span>', oob)


def test_without_the_tab_or_the_queue_the_error_comes_alone(site: dict[str, Any], redis_url: str) -> None:
    b, gone = site["otto"], site["ids"]["archived"][1]
    with Inspector(redis_url) as insp:
        insp.delete_task("mail", gone)
    for form in ({}, {"state": "nonsense"}):  # a page from before the tab was sent, or a made-up one
        reply = _row_action(b, gone, "archive", **form)
        assert reply.status == 404 and "no task" in reply.text and "queue-body" not in reply.text, form
    with Inspector(redis_url) as insp:
        insp.delete_queue("low", force=True)
    reply = b.open("/queues/low/tasks/x/delete", {"csrf_token": b.token(), "state": "pending"},
                   **{"HX-Request": "true", "X-CSRF-Token": b.token()})
    assert reply.status == 404 and "queue-body" not in reply.text and "Traceback" not in reply.text
