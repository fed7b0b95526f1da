"""The producer's fast path: pre-packed commands and messages are byte for byte what the plain path sends,
enqueue_many keeps every option's semantics, and AsyncClient callers share round trips but not outcomes."""

from __future__ import annotations

import asyncio
import os
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import redis
from redis.connection import Connection

from asynqpy import AsyncClient, Client, DuplicateTaskError, Task, TaskIDConflictError, TaskOptions, TaskState
from asynqpy.client import message
from asynqpy.options import new_task_id
from asynqpy.rdb import broker, keys
from asynqpy.rdb.packer import EnqueuePacker, MessageTemplate, SingleEnqueue
from asynqpy.rdb.resp import pack, pack_command
from asynqpy.rdb.scripts import Call, script
from asynqpy.task import TaskInfo
from asynqpy.wire import TaskMessage

NOW = 1_800_000_000.25
LATER = datetime.fromtimestamp(NOW + 90.5, tz=UTC)
OPTIONS = [
    TaskOptions(),
    TaskOptions(queue="q2", max_retry=0, timeout=7, retention=3600),
    TaskOptions(deadline=datetime.fromtimestamp(NOW + 500, tz=UTC)),
    TaskOptions(unique=60),
    TaskOptions(process_at=LATER),
    TaskOptions(process_in=timedelta(seconds=3), unique=timedelta(minutes=5), queue="sq"),
    TaskOptions(group="g1"),
    TaskOptions(group="g1", unique=30, retention=5),
]
TASKS = [
    Task("t"),
    Task("t", b""),
    Task("email:send", b'{"to": "a@b"}'),
    Task("big", b"x" * 200),
    Task("huge", bytes(range(256)) * 80),
    Task("ünï:cødé", "é".encode() * 70),
    Task("hdr", b"p", {"trace": "1", "b": "2"}),
]


@pytest.mark.parametrize("opts", OPTIONS, ids=range(len(OPTIONS)))
def test_packed_messages_and_commands_are_those_of_the_plain_path(opts: TaskOptions) -> None:
    resolved = opts.resolve(NOW, task_id="-")
    template = MessageTemplate(resolved)
    packers = {w: EnqueuePacker(resolved, NOW, wake=w) for w in (False, True)}
    for i, t in enumerate(TASKS):
        tid = f"id-{i}-{'x' * i}"
        one = opts.resolve(NOW, task_id=tid)
        msg = message(t, one)
        payload = None if t.nil_payload else t.payload
        ukey = keys.unique(one.queue, t.type, payload) if one.unique_ttl else ""
        assert ukey == msg.unique_key
        data = template.encode(t.type, payload, t.headers, tid, ukey)
        assert data == msg.SerializeToString()
        for wake, packer in packers.items():
            assert packer.pack(tid, data, ukey) == pack(broker.enqueue(msg, one, now=NOW, wake=wake))


@pytest.mark.parametrize("opts", OPTIONS, ids=range(len(OPTIONS)))
def test_a_drawn_ids_command_from_one_format_is_the_plain_paths(opts: TaskOptions) -> None:
    resolved = opts.resolve(NOW, task_id="-")
    template = MessageTemplate(resolved)
    packer = EnqueuePacker(resolved, NOW, wake=True)
    single = SingleEnqueue(resolved, NOW)
    for t in TASKS:
        tid = new_task_id()
        data = template.encode(t.type, None if t.nil_payload else t.payload, t.headers, tid, "")
        assert packer.pack_drawn(tid, data) == packer.pack(tid, data, "")
        if not t.headers:  # (Client.enqueue sends a task with headers the plain way)
            assert single.command(t.type, t.payload, tid) == packer.pack(tid, data, "")
    # an id of another length (given, not drawn) is packed as pack() does it
    assert packer.pack_drawn("short", b"m") == packer.pack("short", b"m", "")


def test_a_forked_child_never_hands_out_the_ids_its_parent_drew_ahead() -> None:
    new_task_id()  # the parent holds a batch drawn ahead now
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: its ids, then out at once
        os.write(write, " ".join(new_task_id() for _ in range(10)).encode())
        os._exit(0)
    os.close(write)
    os.waitpid(pid, 0)
    child = set(os.read(read, 65536).decode().split())
    os.close(read)
    parent = {new_task_id() for _ in range(10)}
    assert len(child) == 10 and len(parent) == 10 and not child & parent


def test_pack_is_what_redis_py_sends() -> None:
    conn = Connection()
    call: Call[Any] = Call(script("enqueue"), ["k1", "k2"], [b"\x00\r\nbin", "tid", 123, 1.5, -7, "é"], int)
    assert pack(call) == b"".join(conn.pack_command("EVALSHA", call.script.sha, 2, *call.keys, *call.args))
    assert pack_command("SADD", "asynq:queues", "q") == b"".join(conn.pack_command("SADD", "asynq:queues", "q"))
    with pytest.raises(TypeError):
        pack(Call(script("enqueue"), [True], [], int))


@pytest.mark.parametrize("opts", OPTIONS, ids=range(len(OPTIONS)))
def test_enqueue_many_stores_what_enqueue_stores(redis_url: str, r: redis.Redis, opts: TaskOptions) -> None:
    c = Client(redis_url)
    infos = c.enqueue_many(TASKS, opts)
    assert all(isinstance(i, TaskInfo) for i in infos)
    for info, t in zip(infos, TASKS, strict=True):
        assert isinstance(info, TaskInfo)
        h = r.hgetall(keys.task(info.queue, info.id))
        m = TaskMessage()
        m.ParseFromString(h[b"msg"])
        assert (m.type, m.payload, dict(m.headers)) == (t.type, t.payload, dict(t.headers))
        want = TaskInfo.from_message(m, h[b"state"].decode(), next_process_at=info.next_process_at)
        assert info == want
    # and the same options through enqueue, one task: the same state and the same places
    single = c.enqueue(Task("solo", b"s"), opts)
    first = infos[2]
    assert isinstance(first, TaskInfo)
    assert (single.state, single.queue, single.group, single.timeout, single.retention, single.deadline) == (
        first.state, first.queue, first.group, first.timeout, first.retention, first.deadline)
    if first.state is TaskState.SCHEDULED:
        assert r.zscore(keys.scheduled(first.queue), first.id) == r.zscore(keys.scheduled(first.queue), single.id)
    elif first.state is TaskState.PENDING:
        assert r.llen(keys.pending(first.queue)) == len(TASKS) + 1
    else:
        assert r.zcard(keys.group(first.queue, first.group)) == len(TASKS) + 1
    if opts.unique is not None:  # the same tasks again: every one refused, by its own lock
        again = c.enqueue_many(TASKS, opts)
        assert all(isinstance(o, DuplicateTaskError) for o in again)


def test_enqueue_many_reloads_a_flushed_script(redis_url: str, r: redis.Redis) -> None:
    c = Client(redis_url)
    c.enqueue(Task("t", b"0"))
    r.script_flush()
    out = c.enqueue_many([Task("t", b"1"), Task("t", b"2")], chunk=1)
    assert all(isinstance(o, TaskInfo) for o in out) and r.llen(keys.pending("default")) == 3
    r.script_flush()
    c.enqueue(Task("t", b"3"))
    assert r.llen(keys.pending("default")) == 4


def test_client_survives_its_connection_being_closed(redis_url: str, r: redis.Redis) -> None:
    c = Client(redis_url)
    c.enqueue(Task("t", b"1"))
    r.client_kill_filter(_type="normal", skipme=True)
    c.enqueue(Task("t", b"2"))
    assert r.llen(keys.pending("default")) == 2


def test_async_callers_share_round_trips_and_keep_their_own_outcomes(redis_url: str, r: redis.Redis) -> None:
    async def go() -> tuple[list[Any], int]:
        async with AsyncClient(redis_url) as c:
            await c.enqueue(Task("u", b"dup"), unique=60)
            await c.enqueue(Task("u", b"x"), task_id="taken")
            trips = 0
            send = c._runner.send

            async def counting(packed: Any) -> list[Any]:
                nonlocal trips
                trips += 1
                return await send(packed)

            c._runner.send = counting  # type: ignore[method-assign]
            calls = []
            for i in range(100):
                if i == 40:
                    calls.append(c.enqueue(Task("u", b"dup"), unique=60))
                elif i == 41:
                    calls.append(c.enqueue(Task("u", b"y"), task_id="taken"))
                else:
                    calls.append(c.enqueue(Task("u", str(i).encode()), queue="aq" if i % 2 else "default"))
            out = await asyncio.gather(*calls, return_exceptions=True)
            return out, trips

    out, trips = asyncio.run(go())
    assert isinstance(out[40], DuplicateTaskError) and isinstance(out[41], TaskIDConflictError)
    infos = [o for i, o in enumerate(out) if i not in (40, 41)]
    assert all(isinstance(o, TaskInfo) for o in infos)
    assert [o.payload for o in infos[:3]] == [b"0", b"1", b"2"]  # each caller its own TaskInfo
    assert len({o.id for o in infos}) == 98
    assert r.llen(keys.pending("aq")) == 49 and r.llen(keys.pending("default")) == 49 + 2
    assert trips <= 5  # 100 concurrent enqueues, a handful of round trips


def test_async_callers_each_get_the_unreachable_error() -> None:
    async def go() -> list[Any]:
        async with AsyncClient("redis://127.0.0.1:1/0") as c:
            return await asyncio.gather(*(c.enqueue(Task("t")) for _ in range(5)), return_exceptions=True)

    from asynqpy import RedisUnavailableError
    out = asyncio.run(go())
    assert len(out) == 5 and all(isinstance(o, RedisUnavailableError) for o in out)


def test_new_task_ids_are_uuid4() -> None:
    import uuid

    from asynqpy.options import new_task_id, new_task_ids
    ids = set(new_task_ids(1000)) | {new_task_id() for _ in range(1000)}
    assert len(ids) == 2000
    for i in list(ids)[:200]:
        u = uuid.UUID(i)
        assert str(u) == i and u.version == 4 and u.variant == uuid.RFC_4122


def test_enqueue_many_hands_the_oldest_tasks_to_idle_workers(redis_url: str, r: redis.Redis) -> None:
    import time

    r.zadd(keys.waiters("default"), {"w1": time.time() + 60, "w2": time.time() + 60})
    p = r.pubsub()
    p.subscribe(keys.WAKE_CHANNEL)
    p.get_message(timeout=1)
    out = Client(redis_url).enqueue_many([Task("t", str(i).encode()) for i in range(250)], chunk=1000)
    ids = [o.id for o in out if isinstance(o, TaskInfo)]
    assert len(ids) == 250 and r.zcard(keys.waiters("default")) == 0
    boxes = [r.lrange(keys.handoff("default", w), 0, -1) for w in ("w1", "w2")]
    handed = sorted(broker.parse_handoff(b[0])[0] for b in boxes if b)
    assert handed == sorted(ids[:2]) and all(len(b) == 1 for b in boxes)  # the two oldest, one each
    assert r.llen(keys.pending("default")) == 248 and set(r.zrange(keys.lease("default"), 0, -1)) == {
        i.encode() for i in ids[:2]}
    assert r.hget(keys.task("default", ids[0]), "state") == b"active"
    assert r.hget(keys.task("default", ids[-1]), "state") == b"pending"
    assert r.hget(keys.task("default", ids[-1]), "pending_since") is not None
    woken = [m for m in iter(lambda: p.get_message(timeout=0.2), None) if m["type"] == "message"]
    assert len(woken) == 1  # one wake-up for the chunk (its last run), not one per task


def test_drawn_id_messages_are_those_of_the_plain_path() -> None:
    from asynqpy.options import new_task_ids

    for opts in OPTIONS:
        resolved = opts.resolve(NOW, task_id="-")
        template = MessageTemplate(resolved)
        for t, tid in zip(TASKS, new_task_ids(len(TASKS)), strict=True):
            if t.headers or resolved.unique_ttl:
                continue
            want = message(t, opts.resolve(NOW, task_id=tid)).SerializeToString()
            assert template.encode_drawn(t.type, t.payload, tid) == want


def test_enqueue_many_keeps_the_order_and_a_conflict_per_task(redis_url: str, r: redis.Redis) -> None:
    from asynqpy.batching import RUN

    c = Client(redis_url)
    out = c.enqueue_many([Task("t", b"%d" % i) for i in range(RUN * 3 + 7)], queue="order", chunk=RUN * 2)
    ids = [o.id for o in out if isinstance(o, TaskInfo)]
    assert len(ids) == RUN * 3 + 7
    assert [x.decode() for x in reversed(r.lrange(keys.pending("order"), 0, -1))] == ids  # FIFO: oldest first
    # one run of the enqueue_many script with a taken id in its middle: that task alone is refused
    from asynqpy.batching import SameOptions

    same = SameOptions(TaskOptions(queue="order"), NOW)
    items = same.items([Task("t", b"a"), Task("t", b"b"), Task("t", b"c")], [ids[5], "x" * 36, "y" * 36])
    ((cmd, n),) = same.commands(items)
    raws = c._runner.send_scripts([cmd], [same.script])
    codes = [type(o).__name__ for o in same.outcomes(items, raws[0])]
    assert n == 3 and raws[0] == [0, 1, 1]
    assert codes == ["TaskInfo", "TaskInfo", "TaskInfo"]  # a drawn id's conflict: our own re-send, enqueued
    assert [x.decode() for x in r.lrange(keys.pending("order"), 0, 1)] == ["y" * 36, "x" * 36]


@pytest.mark.parametrize("fields", [{}, {"queue": "q2", "max_retry": 3, "timeout": 7, "retention": 60},
                                    {"deadline": datetime.fromtimestamp(NOW + 500, tz=UTC)}])
def test_enqueue_from_templates_stores_what_the_plain_path_stores(redis_url: str, r: redis.Redis,
                                                                   fields: dict[str, Any]) -> None:
    """Client.enqueue packs a plain task (no headers, schedule, group or unique lock) from templates: the stored
    message and the TaskInfo are those of the message built field by field, and the queue is registered."""
    c = Client(redis_url)
    for t in (Task("t", b"payload"), Task("t"), Task("t", b"")):
        info = c.enqueue(t, **fields)
        opts = TaskOptions(**fields).resolve(NOW, task_id=info.id)  # (no field of theirs depends on the time)
        want = message(t, opts)
        got = TaskMessage.FromString(r.hget(keys.task(opts.queue, info.id), "msg"))
        assert got == want and got.SerializeToString() == want.SerializeToString()
        assert info.state == TaskState.PENDING and info.payload == want.payload and info.queue == opts.queue
        assert info.max_retry == want.retry and info.timeout == want.timeout and info.retention == want.retention
        assert r.lrange(keys.pending(opts.queue), 0, 0) == [info.id.encode()]
    assert r.sismember(keys.QUEUES, TaskOptions(**fields).queue)
    assert c._plain is not None and c._plain[1] is not None  # the templates' way was taken
    # headers or a schedule: the general way, stored alike
    h = c.enqueue(Task("t", b"x", {"k": "v"}), **fields)
    assert TaskMessage.FromString(r.hget(keys.task(h.queue, h.id), "msg")).headers["k"] == "v"
