"""The audit log's keyed chain: appends from many writers form one chain; verify names the first record that
was edited, forged, removed or reordered and a log cut short at either end; the cap trims only through a
checkpoint that spills what it trims; listing refuses bad stream ids; Redis trouble reads plainly."""

from __future__ import annotations

import hashlib
import json
import threading
from pathlib import Path
from typing import Any

import pytest
import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from asynqpy.errors import InvalidArgumentError, RedisUnavailableError
from inspector.audit import CHECKPOINT, HEAD, STREAM, AuditLog, canonical, record_mac
from inspector.auditkey import ANCHOR_FILE, KEY_FILE, SPILL_FILE, AuditKeyMissingError, load_key
from inspector.auditverify import verify


def _log(r: redis.Redis, where: Path, **kw: Any) -> AuditLog:
    return AuditLog.open(r, where, writer=True, **kw)


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


def _kind(log: AuditLog) -> tuple[str, int]:
    v = verify(log)
    assert not v.ok and v.broken is not None, v
    return v.broken.kind, v.broken.seq


@pytest.mark.cluster_too  # every key of the log in one slot, scripts and commands through the door
def test_appends_chain_and_verify(r: redis.Redis, tmp_path: Path) -> None:
    log = _log(r, tmp_path, clock=lambda: 1_700_000_000.5)
    first = log.append("login", outcome="ok", user="ann", role="admin", addr="10.0.0.1", request_id="abc")
    second = log.append("tasks.delete", outcome="partial", user="ann", role="admin", queue="q",
                        task_ids=["a", "b"], detail="1 of 2 deleted")
    assert (first.seq, second.seq) == (1, 2)
    assert first.prev == "" and second.prev == first.mac
    assert second.count == 2 and second.task_ids == ("a", "b")
    stored = _record(r, second.id)
    key = (tmp_path / KEY_FILE).read_text().strip().encode()
    assert stored["mac"] == record_mac(key, {k: v for k, v in stored.items() if k != "mac"}) == second.mac
    assert (tmp_path / KEY_FILE).stat().st_mode & 0o777 == 0o600
    assert json.loads((tmp_path / ANCHOR_FILE).read_text())["seq"] == 2
    v = verify(log)
    assert v.ok and v.anchored and v.checked == 2 and (v.first_seq, v.last_seq) == (1, 2)
    page = log.list()
    assert [x.seq for x in page.records] == [2, 1] and page.next_before is None


def test_the_key_comes_from_the_environment_or_a_file_made_once(tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(AuditKeyMissingError, match="ASYNQPY_AUDIT_KEY"):
        load_key(tmp_path, create=False)
    made = load_key(tmp_path, create=True)
    assert load_key(tmp_path, create=False) == made == load_key(tmp_path, create=True)
    monkeypatch.setenv("ASYNQPY_AUDIT_KEY", "from-the-environment")
    assert load_key(tmp_path / "elsewhere", create=False) == b"from-the-environment"


def test_many_writers_build_one_chain(r: redis.Redis, redis_url: str, tmp_path: Path) -> None:
    def write() -> None:
        conn = redis.Redis.from_url(redis_url)
        _fill(_log(conn, tmp_path), 25)
        conn.close()

    threads = [threading.Thread(target=write) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    v = verify(_log(r, tmp_path))
    assert v.ok, v.broken
    assert v.checked == 100 and v.last_seq == 100
    assert json.loads((tmp_path / ANCHOR_FILE).read_text())["seq"] == 100


def test_verify_catches_an_edited_record(r: redis.Redis, tmp_path: Path) -> None:
    log = _log(r, tmp_path)
    ids = _fill(log, 5)
    rec = _record(r, ids[2])
    rec["user"] = "mallory"  # the MAC no longer matches
    _rewrite(r, {ids[2]: rec})
    v = verify(log)
    assert v.broken is not None and (v.broken.kind, v.broken.seq, v.broken.id) == ("edited", 3, ids[2])


def test_verify_catches_an_edit_with_every_later_hash_recomputed(r: redis.Redis, tmp_path: Path) -> None:
    """Without the key, recomputing a plain hash (or a MAC under another key) down the chain does not help."""
    log = _log(r, tmp_path)
    ids = _fill(log, 5)
    recs = {sid: _record(r, sid) for sid in ids}
    recs[ids[1]]["outcome"] = "denied"
    prev = recs[ids[0]]["mac"]
    for sid in ids[1:]:
        body = {k: v for k, v in recs[sid].items() if k != "mac"} | {"prev": prev}
        recs[sid] = body | {"mac": hashlib.sha256(canonical(body).encode()).hexdigest()}
        prev = recs[sid]["mac"]
    _rewrite(r, recs)
    r.hset(HEAD, "mac", prev)
    assert _kind(log) == ("edited", 2)


def test_verify_catches_a_removed_record(r: redis.Redis, tmp_path: Path) -> None:
    log = _log(r, tmp_path)
    ids = _fill(log, 6)
    r.xdel(STREAM, ids[3])
    v = verify(log)
    assert v.broken is not None and (v.broken.kind, v.broken.seq, v.broken.id) == ("removed", 5, ids[4])
    assert "seq 3 and seq 5" in v.broken.reason


def test_verify_catches_the_oldest_record_removed(r: redis.Redis, tmp_path: Path) -> None:
    log = _log(r, tmp_path)
    ids = _fill(log, 6)
    r.xdel(STREAM, ids[0])
    kind, seq = _kind(log)
    assert (kind, seq) == ("truncated", 2)


def test_verify_catches_a_stream_trimmed_by_hand(r: redis.Redis, tmp_path: Path) -> None:
    log = _log(r, tmp_path)
    _fill(log, 12)
    r.xtrim(STREAM, maxlen=5, approximate=False)
    assert _kind(log) == ("truncated", 8)


def test_verify_catches_the_stream_and_head_deleted(r: redis.Redis, tmp_path: Path) -> None:
    log = _log(r, tmp_path)
    _fill(log, 3)
    r.delete(STREAM, HEAD)
    v = verify(log)
    assert v.broken is not None and v.broken.kind == "emptied" and "seq 3" in v.broken.reason


@pytest.mark.cluster_too  # every key of the log in one slot, scripts and commands through the door
def test_verify_catches_the_newest_removed_and_the_head_rewound(r: redis.Redis, tmp_path: Path) -> None:
    log = _log(r, tmp_path)
    ids = _fill(log, 4)
    third = _record(r, ids[2])
    r.xdel(STREAM, ids[3])
    r.hset(HEAD, mapping={"mac": third["mac"], "seq": 3, "id": ids[2]})
    v = verify(log)
    assert v.broken is not None and (v.broken.kind, v.broken.seq) == ("rewound", 3)
    assert "reached seq 4" in v.broken.reason


def test_verify_catches_a_forged_record(r: redis.Redis, tmp_path: Path) -> None:
    log = _log(r, tmp_path)
    _fill(log, 3)
    head = r.hgetall(HEAD)
    body = {"action": "queue.resume", "outcome": "ok", "time": 1.0, "user": "ann", "role": "admin", "addr": "",
            "queue": "q", "task_ids": [], "count": None, "detail": "", "request_id": "", "seq": 4,
            "prev": head[b"mac"].decode(), "keep_from": 0}
    mac = hashlib.sha256(canonical(body).encode()).hexdigest()  # all one can compute without the key
    sid = r.xadd(STREAM, {"r": canonical(body | {"mac": mac})})
    r.hset(HEAD, mapping={"mac": mac, "seq": 4, "id": sid})
    v = verify(log)
    assert v.broken is not None and (v.broken.kind, v.broken.seq) == ("edited", 4)
    assert "without the audit key" in v.broken.reason


def test_verify_catches_removed_newest_records_and_a_deleted_head(r: redis.Redis, tmp_path: Path) -> None:
    log = _log(r, tmp_path)
    ids = _fill(log, 4)
    r.xdel(STREAM, ids[-1])
    assert _kind(log) == ("rewound", 3)
    r.delete(HEAD)
    assert _kind(log)[0] == "rewound"
    (tmp_path / ANCHOR_FILE).unlink()  # with no anchor, only the head can tell
    assert _kind(log)[0] == "head"


def test_verify_catches_reordered_records(r: redis.Redis, tmp_path: Path) -> None:
    log = _log(r, tmp_path)
    ids = _fill(log, 5)
    _rewrite(r, {ids[1]: _record(r, ids[2]), ids[2]: _record(r, ids[1])})
    v = verify(log)
    assert v.broken is not None and (v.broken.kind, v.broken.seq, v.broken.id) == ("reordered", 3, ids[1])


def test_verify_catches_a_record_moved_back(r: redis.Redis, tmp_path: Path) -> None:
    log = _log(r, tmp_path)
    ids = _fill(log, 5)
    recs = {sid: _record(r, sid) for sid in ids}
    order = [recs[ids[0]], recs[ids[2]], recs[ids[3]], recs[ids[1]], recs[ids[4]]]
    _rewrite(r, dict(zip(ids, order, strict=True)))
    assert _kind(log) == ("reordered", 3)


@pytest.mark.cluster_too  # every key of the log in one slot, scripts and commands through the door
def test_the_cap_trims_only_through_a_checkpoint_that_spills(r: redis.Redis, tmp_path: Path) -> None:
    log = _log(r, tmp_path, cap=10)
    ids = _fill(log, 25)
    assert r.xlen(STREAM) <= 10
    v = verify(log)
    assert v.ok, v.broken
    spilled = [json.loads(line) for line in (tmp_path / SPILL_FILE).read_text().splitlines()]
    kept = [x for x in log.list().records if x.action != CHECKPOINT]
    # every action record is either still in the stream or in the spill file, none twice
    assert sorted([x["id"] for x in spilled if x["action"] != CHECKPOINT] + [x.id for x in kept]) == sorted(ids)
    ckpt = next(x for x in log.list().records if x.action == CHECKPOINT)
    assert ckpt.keep_from == v.first_seq and "trimmed by the cap of 10" in ckpt.detail
    assert str(SPILL_FILE) in ckpt.detail
    trimmed = log.trimmed()
    assert trimmed is not None and trimmed.keep_from == v.first_seq
    # trimming past the checkpoint by hand is caught
    r.xtrim(STREAM, maxlen=3, approximate=False)
    assert _kind(log)[0] == "truncated"


def test_verify_needs_the_key(r: redis.Redis, tmp_path: Path) -> None:
    _fill(_log(r, tmp_path), 2)
    with pytest.raises(AuditKeyMissingError):
        verify(AuditLog.open(r, tmp_path / "no-key-here", writer=False))
    with pytest.raises(AuditKeyMissingError):
        AuditLog(r).append("x", outcome="ok")


def test_list_filters_and_pages(r: redis.Redis, tmp_path: Path) -> None:
    now = [1_700_000_000.0]
    log = _log(r, tmp_path, clock=lambda: now[0])
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


@pytest.mark.parametrize("before", ["0-0", "0", "x", "1-2-3", "18446744073709551616-0", "-1", "1-"])
def test_list_refuses_a_bad_stream_id(r: redis.Redis, before: str) -> None:
    with pytest.raises(InvalidArgumentError, match="before"):
        AuditLog(r).list(before=before)


def test_bad_arguments_and_redis_down(tmp_path: Path) -> None:
    down = redis.Redis(host="127.0.0.1", port=1, socket_connect_timeout=0.2, retry=Retry(NoBackoff(), 0))
    log = _log(down, tmp_path)
    with pytest.raises(InvalidArgumentError):
        log.append("", outcome="ok")
    with pytest.raises(InvalidArgumentError):
        log.append("x", outcome="not a word")
    with pytest.raises(RedisUnavailableError) as exc:
        log.append("x", outcome="ok")
    assert str(exc.value).startswith("cannot reach Redis at redis://127.0.0.1:1/0: ")
    assert "Redis is unavailable" not in str(exc.value) and exc.value.kind == "connection"
    with pytest.raises(RedisUnavailableError, match=r"cannot reach Redis at redis://127\.0\.0\.1:1/0"):
        verify(log)
    assert HEAD == "asynqpy:{audit}:head" and STREAM == "asynqpy:{audit}"  # one slot on a cluster


def test_no_trim_when_the_spill_file_cannot_be_written(r: redis.Redis, tmp_path: Path) -> None:
    (tmp_path / "a-file").write_text("")
    log = AuditLog(r, key=b"k", cap=5, spill_to=tmp_path / "a-file" / SPILL_FILE)
    _fill(log, 12)
    assert r.xlen(STREAM) == 12  # past the cap, but nothing left the stream unspilled
    assert verify(log).ok and log.trimmed() is None
