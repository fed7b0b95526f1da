"""Inspector.find and count_matches against real Redis: every filter, negation, masking, and a chunked scan
resumed by its cursor."""

from __future__ import annotations

import dataclasses

import pytest
import redis

from asynqpy import Client, InvalidArgumentError, QueueNotFoundError, Task, typed
from asynqpy.rdb import keys
from inspector import Inspector
from inspector.models import TaskRecord
from tests.inspector.worker import Clock, Worker

pytestmark = pytest.mark.cluster_too


def ids(insp: Inspector, query: str, **kw: object) -> list[str]:
    res = insp.find("q", query, **kw)  # type: ignore[arg-type]
    assert res.done
    return sorted(t.id for t in res.tasks)


def test_type_state_and_id(insp: Inspector, one_of_each: dict[str, str]) -> None:
    assert ids(insp, "type:t:p*") == ["pending", "pending2"]
    assert ids(insp, "type:t:?ctive") == ["active"]
    assert ids(insp, "state:retry,archived") == ["archived", "retry"]
    assert ids(insp, "state:aggregating") == ["aggregating"]
    assert ids(insp, "id:pend*") == ["pending", "pending2"]
    assert ids(insp, "id:pending") == ["pending"]
    assert ids(insp, "-type:t:* ") == []
    assert ids(insp, "-state:pending,active,scheduled,retry,archived -id:agg*") == ["completed"]
    assert len(insp.find("q", "").tasks) == 8


def test_error_retried_and_failed(insp: Inspector, client: Client, worker: Worker, clock: Clock) -> None:
    for i in range(4):
        client.enqueue(Task("mail"), queue="q", task_id=f"t{i}")
    for tid in worker.take("q", 4):
        worker.fail("q", tid, "SMTP busy: try later" if tid in ("t1", "t3") else "bad input")
    clock.advance(3600)
    assert ids(insp, 'error:"smtp BUSY"') == ["t1", "t3"]
    assert ids(insp, "-error:smtp state:retry") == ["t0", "t2"]
    assert ids(insp, "retried:1") == ["t0", "t1", "t2", "t3"]
    assert ids(insp, "retried:>1") == []
    assert ids(insp, "failed:>59m") == ["t0", "t1", "t2", "t3"]
    assert ids(insp, "failed:<10m") == []
    assert ids(insp, "age:>59m state:retry") == ["t0", "t1", "t2", "t3"]


def test_age_of_pending_and_unknown_age(insp: Inspector, client: Client, clock: Clock) -> None:
    client.enqueue(Task("a"), queue="q", task_id="old")
    clock.advance(7200)
    client.enqueue(Task("a"), queue="q", task_id="later", process_in=60)
    assert ids(insp, "age:>1h") == ["old"]
    assert ids(insp, "age:<1h") == []
    assert ids(insp, "-age:>1h") == ["later"]  # a scheduled task has no age: the negation holds


def test_payload_text_json_path_and_headers(insp: Inspector, client: Client) -> None:
    client.enqueue(Task("o", b'{"user_id": 42, "org": {"name": "ACME"}, "total": 120.5}',
                        headers={"tenant": "acme"}), queue="q", task_id="a")
    client.enqueue(Task("o", b'{"user_id": 7, "org": {"name": "Initech"}, "total": 9}',
                        headers={"tenant": "initech"}), queue="q", task_id="b")
    client.enqueue(Task("o", b"plain text mentioning acme"), queue="q", task_id="c")
    assert ids(insp, "payload:acme") == ["a", "c"]
    assert ids(insp, "payload.user_id:42") == ["a"]
    assert ids(insp, "payload.org.name:Init*") == ["b"]
    assert ids(insp, "payload.total:>100") == ["a"]
    assert ids(insp, "header.TENANT:acme") == ["a"]
    assert ids(insp, "-header.tenant:acme") == ["b", "c"]
    assert ids(insp, "payload.user_id:7 -header.tenant:acme type:o") == ["b"]


def test_typed_task_arguments(insp: Inspector, client: Client) -> None:
    @typed.task("find:welcome")
    def welcome(user_id: int, email: str) -> None: ...

    welcome.enqueue(client, 42, "ada@acme.com")
    welcome.options(queue="q").enqueue(client, 42, email="ada@acme.com")
    welcome.options(queue="q").enqueue(client, user_id=9, email="bob@initech.com")
    res = insp.find("q", "payload.user_id:42 payload.email:*@acme.com")
    assert [t.info.type for t in res.tasks] == ["find:welcome"]


def test_a_masked_value_cannot_be_matched(insp: Inspector, client: Client) -> None:
    client.enqueue(Task("o", b'{"card": "4111", "name": "ada"}'), queue="q", task_id="a")

    def mask(rec: TaskRecord) -> TaskRecord:
        info = dataclasses.replace(rec.info, payload=rec.info.payload.replace(b"4111", b"[redacted]"))
        return dataclasses.replace(rec, info=info, redacted=("payload.card",))

    assert ids(insp, "payload.card:4111") == ["a"]
    assert ids(insp, "payload.card:4111", mask=mask) == []
    assert ids(insp, "payload:411", mask=mask) == []
    assert ids(insp, "payload.name:ada", mask=mask) == ["a"]
    assert insp.count_matches("q", "payload.card:4111", mask=mask).matched == 0


def test_chunked_scan_resumes_by_cursor(insp: Inspector, client: Client) -> None:
    for i in range(30):
        client.enqueue(Task("r" if i % 3 else "e", b"{}"), queue="q", task_id=f"p{i:02d}")
    for i in range(10):
        client.enqueue(Task("r", b"{}"), queue="q", task_id=f"s{i:02d}", process_in=100 + i)
    seen: list[str] = []
    cursor = ""
    calls = 0
    while True:
        res = insp.find("q", "type:r", limit=4, cursor=cursor, window=7, max_scan=9)
        calls += 1
        assert res.scanned <= 9 and res.total == 40
        seen += [t.id for t in res.tasks]
        if res.done:
            assert res.position == 40
            break
        assert res.next_cursor and res.next_cursor != cursor
        cursor = res.next_cursor
    assert seen == [f"p{i:02d}" for i in range(30) if i % 3] + [f"s{i:02d}" for i in range(10)]
    assert calls > 5
    res = insp.find("q", "type:nothing", max_scan=25, window=10)
    assert (res.scanned, res.position, res.next_cursor) == (25, 25, "pending:25")
    rest = insp.find("q", "type:nothing", cursor=res.next_cursor or "")
    assert rest.done and rest.scanned == 15


def test_count_says_at_least_until_complete(insp: Inspector, client: Client) -> None:
    for i in range(50):
        client.enqueue(Task("c"), queue="q", task_id=f"c{i:02d}")
    part = insp.count_matches("q", "type:c -id:c0*", max_scan=20, window=8)
    assert (part.matched, part.scanned, part.complete, part.total) == (10, 20, False, 50)
    whole = insp.count_matches("q", "type:c -id:c0*")
    assert (whole.matched, whole.complete, whole.next_cursor) == (40, True, None)


def test_undecodable_and_missing_tasks_match_only_what_they_show(insp: Inspector, client: Client,
                                                                 r: redis.Redis) -> None:
    client.enqueue(Task("t", b"x"), queue="q", task_id="bad")
    r.hset(keys.task("q", "bad"), mapping={"msg": b"\xff\xff", "asynqpy_error": "garbled message"})
    r.lpush(keys.pending("q"), "ghost")
    assert ids(insp, "error:garbled") == ["bad"]
    assert ids(insp, "id:ghost") == ["ghost"]
    assert ids(insp, "type:t") == []
    assert ids(insp, "payload:x") == []


def test_bad_arguments(insp: Inspector, client: Client) -> None:
    client.enqueue(Task("t"), queue="q")
    with pytest.raises(InvalidArgumentError, match="'colour:red'"):
        insp.find("q", "type:t colour:red")
    for kw, name in (({"cursor": "nowhere"}, "cursor"), ({"cursor": "retry:x"}, "cursor"), ({"limit": 0}, "limit"),
                     ({"window": 5000}, "window")):
        with pytest.raises(InvalidArgumentError) as e:
            insp.find("q", "type:t", **kw)  # type: ignore[arg-type]
        assert e.value.argument == name
    with pytest.raises(QueueNotFoundError):
        insp.find("nope", "type:t")


def test_a_cursor_into_a_state_the_query_leaves_out_goes_on_with_the_next(insp: Inspector,
                                                                          one_of_each: dict[str, str]) -> None:
    assert [t.id for t in insp.find("q", "state:active,retry", cursor="pending:1").tasks] == ["active", "retry"]
    assert [t.id for t in insp.find("q", "state:aggregating", cursor="aggregating:0:a").tasks] == ["aggregating"]
    assert insp.find("q", "state:aggregating", cursor="aggregating:0:zzz").tasks == ()


def test_a_redaction_policy_hides_fields_and_headers_from_terms(insp: Inspector, client: Client) -> None:
    from inspector.redact import Policy

    pol = Policy.from_mapping({"types": {"pay:*": {"fields": ["payload.card"], "headers": ["X-Card-Ref"]}}})
    client.enqueue(Task("pay:charge", b'{"card": "4242", "api_token": "tok-1", "n": 1}', headers={"X-Card-Ref": "r7"}),
                   queue="q", task_id="c")

    def viewer(rec: TaskRecord) -> TaskRecord:
        return pol.task(rec, "viewer", full=False)

    def admin(rec: TaskRecord) -> TaskRecord:
        return pol.task(rec, "admin", full=False)

    for q in ("payload.card:4242", "header.x-card-ref:r7", "payload.api_token:tok-1", "payload:4242"):
        assert ids(insp, q, mask=admin) == ["c"], q
        assert ids(insp, q, mask=viewer) == [], q
    assert ids(insp, "payload.n:1 -header.x-card-ref:r7", mask=viewer) == ["c"]
