"""search: by type, id prefix, payload text and error text, in bounded windows with a cursor to resume."""

from __future__ import annotations

import pytest
import redis

from asynqpy import Client, InvalidArgumentError, Task
from asynqpy.rdb import keys
from inspector import Inspector
from tests.inspector.worker import Worker

pytestmark = pytest.mark.cluster_too


@pytest.fixture
def mixed(client: Client) -> None:
    for i in range(30):
        kind = "email:welcome" if i % 3 == 0 else "report:daily"
        payload = f'{{"user": {i}, "Name": "User{i}"}}'.encode()
        client.enqueue(Task(kind, payload), queue="q", task_id=f"id-{i:02d}")


def test_by_type_prefix(insp: Inspector, mixed: None) -> None:
    res = insp.search("q", "pending", type="email:")
    assert [t.id for t in res.tasks] == [f"id-{i:02d}" for i in range(0, 30, 3)]
    assert res.done and res.scanned == 30


def test_by_id_prefix_and_text(insp: Inspector, mixed: None) -> None:
    assert [t.id for t in insp.search("q", "pending", id_prefix="id-1").tasks] == [f"id-1{i}" for i in range(10)]
    assert [t.id for t in insp.search("q", "pending", text="name\": \"USER7\"").tasks] == ["id-07"]
    assert insp.search("q", "pending", text="user", type="email:welcome", id_prefix="id-2").tasks[0].id == "id-21"


def test_by_error(insp: Inspector, client: Client, worker: Worker) -> None:
    for i in range(4):
        client.enqueue(Task("t"), queue="q", task_id=f"t{i}")
    for tid in worker.take("q", 4):
        worker.fail("q", tid, "Timeout talking to SMTP" if tid in ("t1", "t3") else "bad input")
    assert [t.id for t in insp.search("q", "retry", error="smtp").tasks] == ["t1", "t3"]


def test_limit_and_cursor_resume_without_loss(insp: Inspector, mixed: None) -> None:
    seen: list[str] = []
    cursor = 0
    while True:
        res = insp.search("q", "pending", type="report:", limit=3, cursor=cursor, window=4)
        seen += [t.id for t in res.tasks]
        if res.done:
            break
        assert res.next_cursor is not None and res.next_cursor > cursor
        cursor = res.next_cursor
    assert seen == [f"id-{i:02d}" for i in range(30) if i % 3]


def test_scan_is_bounded(insp: Inspector, mixed: None) -> None:
    res = insp.search("q", "pending", text="nothing matches this", max_scan=10, window=4)
    assert res.tasks == () and res.scanned == 10 and res.next_cursor == 10
    res = insp.search("q", "pending", text="nothing matches this", cursor=res.next_cursor or 0, max_scan=100)
    assert res.scanned == 20 and res.done


def test_sorted_set_search(insp: Inspector, client: Client) -> None:
    for i in range(12):
        client.enqueue(Task("t", b"needle" if i == 9 else b"hay"), queue="q", task_id=f"s{i:02d}",
                       process_in=100 + i)
    res = insp.search("q", "scheduled", text="NEEDLE", window=5)
    assert [t.id for t in res.tasks] == ["s09"] and res.done


def test_undecodable_rows_match_only_by_id_or_error(insp: Inspector, client: Client, r: redis.Redis) -> None:
    client.enqueue(Task("t", b"x"), queue="q", task_id="bad")
    r.hset(keys.task("q", "bad"), mapping={"msg": b"\xff\xff", "asynqpy_error": "garbled message"})
    assert [t.id for t in insp.search("q", "pending", error="garbled").tasks] == ["bad"]
    assert insp.search("q", "pending", type="t").tasks == ()


def test_bad_search_arguments(insp: Inspector, mixed: None) -> None:
    for kwargs, name in (({"limit": 0}, "limit"), ({"cursor": -1}, "cursor"), ({"text": b"bytes"}, "text"),
                         ({"max_scan": "9"}, "max_scan")):
        with pytest.raises(InvalidArgumentError) as err:
            insp.search("q", "pending", **kwargs)  # type: ignore[arg-type]
        assert err.value.argument == name
