"""The audit log's hash chain: appends from many writers form one chain; verify names the first record that was
edited, removed or reordered, and trimming by the cap is not a break."""

from __future__ import annotations

import json
import threading
from typing import Any

import pytest
import redis

from asynqpy.errors import InvalidArgumentError, RedisUnavailableError
from inspector.audit import HEAD, STREAM, AuditLog, chain_hash


def _fill(log: AuditLog, n: int) -> list[str]:
    return [log.append("task.run", outcome="ok", user="ann", role="operator", queue="q", task_ids=[f"t{i}"]).id
            for i in range(n)]


def _record(r: Any, sid: str) -> dict:
    [(_, fields)] = r.xrange(STREAM, sid, sid)
    return json.loads(fields[b"r"])


def _rewrite(r: Any, records: dict[str, dict]) -> None:
    """Rebuild the stream with the same ids, replacing the records given by id (what someone with write access
    to Redis would do to edit a stream in place)."""
    entries = [(sid.decode(), f) for sid, f in r.xrange(STREAM)]
    r.delete(STREAM)
    for sid, fields in entries:
        r.xadd(STREAM, {"r": json.dumps(records[sid])} if sid in records else fields, id=sid)


def test_appends_chain_and_verify(r: redis.Redis) -> None:
    log = AuditLog(r, clock=lambda: 1_700_000_000.5)
    first = log.append("login", outcome="ok", user="ann", role="admin", addr="10.0.0.1", request_id="abc")
    second = log.append("tasks.delete", outcome="partial", user="ann", role="admin", queue="q",
                        task_ids=["a", "b"], detail="1 of 2 deleted")
    assert (first.seq, second.seq) == (1, 2)
    assert first.prev == "" and second.prev == first.hash
    assert second.count == 2 and second.task_ids == ("a", "b")
    stored = _record(r, second.id)
    assert stored["hash"] == chain_hash({k: v for k, v in stored.items() if k != "hash"}) == second.hash
    v = log.verify()
    assert v.ok and v.checked == 2 and (v.first_seq, v.last_seq) == (1, 2)
    page = log.list()
    assert [x.seq for x in page.records] == [2, 1] and page.next_before is None


def test_many_writers_build_one_chain(r: redis.Redis, redis_url: str) -> None:
    def write() -> None:
        conn = redis.Redis.from_url(redis_url)
        _fill(AuditLog(conn), 25)
        conn.close()

    threads = [threading.Thread(target=write) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    v = AuditLog(r).verify()
    assert v.ok, v.broken
    assert v.checked == 100 and v.last_seq == 100


def test_verify_catches_an_edited_record(r: redis.Redis) -> None:
    log = AuditLog(r)
    ids = _fill(log, 5)
    rec = _record(r, ids[2])
    rec["user"] = "mallory"  # the hash no longer matches
    _rewrite(r, {ids[2]: rec})
    v = log.verify()
    assert not v.ok and v.broken is not None
    assert (v.broken.kind, v.broken.seq, v.broken.id) == ("edited", 3, ids[2])


def test_verify_catches_an_edit_with_a_recomputed_hash(r: redis.Redis) -> None:
    log = AuditLog(r)
    ids = _fill(log, 4)
    rec = _record(r, ids[1])
    rec["outcome"] = "denied"
    rec["hash"] = chain_hash({k: v for k, v in rec.items() if k != "hash"})
    _rewrite(r, {ids[1]: rec})
    v = log.verify()
    assert not v.ok and v.broken is not None
    assert (v.broken.kind, v.broken.seq) == ("edited", 3)  # the next record no longer names it as prev


def test_verify_catches_a_removed_record(r: redis.Redis) -> None:
    log = AuditLog(r)
    ids = _fill(log, 6)
    r.xdel(STREAM, ids[3])
    v = log.verify()
    assert not v.ok and v.broken is not None
    assert (v.broken.kind, v.broken.seq, v.broken.id) == ("removed", 5, ids[4])
    assert "seq 3 and seq 5" in v.broken.reason


def test_verify_catches_removed_newest_records(r: redis.Redis) -> None:
    log = AuditLog(r)
    ids = _fill(log, 4)
    r.xdel(STREAM, ids[-1])
    v = log.verify()
    assert not v.ok and v.broken is not None and v.broken.kind == "removed" and v.broken.seq == 4


def test_verify_catches_a_deleted_head(r: redis.Redis) -> None:
    log = AuditLog(r)
    ids = _fill(log, 3)
    r.xdel(STREAM, ids[-1])
    r.delete(HEAD)
    v = log.verify()
    assert not v.ok and v.broken is not None and v.broken.kind == "head"


def test_verify_catches_reordered_records(r: redis.Redis) -> None:
    log = AuditLog(r)
    ids = _fill(log, 5)
    _rewrite(r, {ids[1]: _record(r, ids[2]), ids[2]: _record(r, ids[1])})
    v = log.verify()
    assert not v.ok and v.broken is not None
    assert (v.broken.kind, v.broken.seq, v.broken.id) == ("reordered", 3, ids[1])


def test_verify_catches_a_record_moved_back(r: redis.Redis) -> None:
    log = AuditLog(r)
    ids = _fill(log, 5)
    recs = {sid: _record(r, sid) for sid in ids}
    order = [recs[ids[0]], recs[ids[2]], recs[ids[3]], recs[ids[1]], recs[ids[4]]]
    _rewrite(r, dict(zip(ids, order, strict=True)))
    v = log.verify()
    assert v.broken is not None and (v.broken.kind, v.broken.seq) == ("reordered", 3)


def test_trimming_by_the_cap_is_not_a_break(r: redis.Redis) -> None:
    log = AuditLog(r, cap=10)
    _fill(log, 25)
    assert r.xlen(STREAM) == 10
    v = log.verify()
    assert v.ok and v.checked == 10 and (v.first_seq, v.last_seq) == (16, 25)


def test_list_filters_and_pages(r: redis.Redis) -> None:
    now = [1_700_000_000.0]
    log = AuditLog(r, clock=lambda: now[0])
    for i in range(30):
        now[0] += 60
        log.append("task.run" if i % 2 else "queue.pause", outcome="ok", user="ann" if i % 3 else "bob",
                   queue=f"q{i % 2}")
    assert {x.user for x in log.list(user="bob").records} == {"bob"}
    assert len(log.list(user="bob").records) == 10
    assert {x.action for x in log.list(action="task.*").records} == {"task.run"}
    assert {x.queue for x in log.list(queue="q0").records} == {"q0"}
    since, until = 1_700_000_000 + 60 * 10, 1_700_000_000 + 60 * 20
    got = log.list(since=since, until=until).records
    assert [x.time for x in got] == [1_700_000_000 + 60 * i for i in range(19, 9, -1)]
    first = log.list(limit=12)
    rest = log.list(limit=100, before=first.next_before)
    assert [x.seq for x in first.records + rest.records] == list(range(30, 0, -1))


def test_bad_arguments_and_redis_down() -> None:
    down = redis.Redis(host="127.0.0.1", port=1, socket_connect_timeout=0.2)
    log = AuditLog(down)
    with pytest.raises(InvalidArgumentError):
        log.append("", outcome="ok")
    with pytest.raises(InvalidArgumentError):
        log.append("x", outcome="not a word")
    with pytest.raises(RedisUnavailableError):
        log.append("x", outcome="ok")
    with pytest.raises(RedisUnavailableError):
        log.verify()
    assert HEAD.startswith("asynqpy:") and STREAM == "asynqpy:audit"
