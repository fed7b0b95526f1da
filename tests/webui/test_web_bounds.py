"""A producer cannot hang a browser: every producer-supplied text in a list is cut to a cell's length (types,
queues, payloads, errors, results, header values), and a task's own page shows at most FULL characters of each."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis

from inspector.bounds import CELL, FULL, clip
from tests.inspector.worker import Worker
from tests.webui.authkit import make_app
from tests.webui.livekit import Browser, go_enqueue, serve

MB = 1_000_000


@pytest.fixture
def big(redis_url: str, users_path: Path) -> Iterator[dict[str, Any]]:
    """Queue "big": a pending task with a 1 MB type and a 1 MB header, and an archived one with a 1 MB error."""
    archived = go_enqueue(redis_url, "big", "dead:" + "D" * MB)
    r = redis.Redis.from_url(redis_url)
    w = Worker(r, time.time)
    assert w.take("big", 1) == [archived]
    w.kill("big", archived, "E" * MB)
    r.close()
    pending = go_enqueue(redis_url, "big", "T" * MB, b"p" * MB, headers={"h": "H" * MB})
    app = make_app(redis_url, users_path)
    with serve(app) as base:
        b = Browser(base)
        assert b.login("ada").status == 303
        yield {"b": b, "pending": pending, "archived": archived}
    app.extensions["asynqpy.inspector"].close()


def test_clip() -> None:
    assert clip("short") == "short" and clip(None) == ""
    assert clip("x" * 500) == "x" * (CELL - 1) + "…" and len(clip("y" * 10**6, FULL)) == FULL


def test_lists_show_a_cell_of_each_huge_value_and_the_task_page_a_bounded_part(big: dict[str, Any]) -> None:
    b = big["b"]
    for path in ("/queues/big/pending", "/queues/big/archived", "/queues/big/active", "/errors", "/"):
        page = b.open(path)
        assert page.status == 200, path
        assert "T" * (CELL + 1) not in page.text and "E" * (CELL + 1) not in page.text, path
        assert "D" * (CELL + 1) not in page.text and "p" * (CELL + 1) not in page.text, path
        assert len(page.text) < 200_000, (path, len(page.text))
    assert "T" * (CELL - 1) + "…" in b.open("/queues/big/pending").text
    task = b.open(f"/queues/big/tasks/{big['pending']}").text
    assert "T" * (FULL - 1) + "…" in task and "T" * FULL not in task and "cut for display" in task
    assert "H" * (FULL - 1) + "…" in task and "H" * FULL not in task
    dead = b.open(f"/queues/big/tasks/{big['archived']}").text
    assert "E" * (FULL - 1) + "…" in dead and "E" * FULL not in dead
