"""Flow control through the Inspector and the CLI: `asynqpy limit set/ls/rm`, stats, explain."""

from __future__ import annotations

import json
import time

import pytest
import redis

from asynqpy import Client, Limit, Task
from asynqpy.rdb import broker, keys
from asynqpy.rdb.sync_runner import SyncRunner
from inspector.api import Inspector
from inspector.cli import main


def cli(capsys: pytest.CaptureFixture[str], url: str, *argv: str) -> tuple[int, str, str]:
    code = main([*argv, "--redis-url", url])
    out, err = capsys.readouterr()
    return code, out, err


def test_limit_commands_stats_and_explain(capsys: pytest.CaptureFixture[str], redis_url: str, r: redis.Redis) -> None:
    c = Client(redis_url)
    ids = [c.enqueue(Task("email:send", b"")).id for _ in range(3)]
    code, out, _ = cli(capsys, redis_url, "limit", "set", "email:*", "--concurrency", "2")
    assert code == 0 and "limit email:*: concurrency 2" in out and "Go asynq workers do not" in out
    assert cli(capsys, redis_url, "limit", "set", "sync:crm", "--rate", "600/m", "--key", "payload.account")[0] == 0
    SyncRunner(r).run(broker.dequeue_timed("default", lease_expiry=time.time() + 30, count=10))
    code, out, _ = cli(capsys, redis_url, "limit", "ls")
    row = next(line.split() for line in out.splitlines() if line.startswith("email:*"))
    assert code == 0 and row[:2] == ["email:*", "default"] and "2/2" in row and row[-1] == "1"
    assert "1 (oldest " in out
    assert "sync:crm" in out
    code, out, _ = cli(capsys, redis_url, "limit", "ls", "--json")
    data = json.loads(out)
    assert [lim["pattern"] for lim in data["limits"]] == ["email:*", "sync:crm"]
    assert "limits:" in cli(capsys, redis_url, "stats")[1]
    code, out, _ = cli(capsys, redis_url, "task", "explain", "default", ids[2])
    assert "waiting for limit email:* (2/2 running)" in out, out
    code, _, err = cli(capsys, redis_url, "limit", "set", "x", "--rate", "fast")
    assert code != 0 and "rate 'fast'" in err and err.count("\n") == 1
    assert cli(capsys, redis_url, "limit", "set", "x")[0] != 0  # neither concurrency nor rate
    assert cli(capsys, redis_url, "limit", "rm", "email:*")[:2] == (0, "limit email:* removed\n")
    assert cli(capsys, redis_url, "limit", "rm", "email:*") == \
        (1, "", "asynqpy: no limit 'email:*' (`asynqpy limit ls` lists them)\n")


def test_inspector_limit_methods(redis_url: str, r: redis.Redis) -> None:
    Client(redis_url).enqueue(Task("email:x", b""))
    with Inspector(redis_url) as insp:
        insp.set_limit(Limit("email:*", rate=5))
        assert insp.limits() == [Limit("email:*", rate=5.0, burst=5.0)]
        (u,) = insp.limit_usage()
        assert (u.queue, u.running, u.waiting, u.tokens) == ("default", 0, 0, 5.0)
        assert insp.remove_limit("email:*") and insp.limits() == []


def test_queue_limit_command_and_refusal_metrics(capsys: pytest.CaptureFixture[str], redis_url: str,
                                                 r: redis.Redis) -> None:
    from asynqpy import QueueFullError
    from exporter.collector import QueueStateCollector
    code, out, _ = cli(capsys, redis_url, "queue", "limit", "billing", "--max-size", "1", "--max-latency", "10m")
    assert code == 0 and out == "queue 'billing': max size 1, max latency 600 s; 0 enqueue(s) refused so far\n"
    c = Client(redis_url)
    c.enqueue(Task("t", b""), queue="billing")
    with pytest.raises(QueueFullError):
        c.enqueue(Task("t", b""), queue="billing")
    assert "1 enqueue(s) refused" in cli(capsys, redis_url, "queue", "limit", "billing")[1]
    with pytest.raises(SystemExit) as exit:  # argparse's check: the usage, then one line naming the option
        cli(capsys, redis_url, "queue", "limit", "billing", "--max-latency", "soon")
    err = capsys.readouterr().err
    assert exit.value.code == 2 and "error: argument --max-latency: duration 'soon'" in err
    c.enqueue(Task("email:x", b""))
    with Inspector(redis_url) as insp:
        insp.set_limit(Limit("email:*", concurrency=1))
        SyncRunner(r).run(broker.dequeue_timed("default", lease_expiry=time.time() + 30, count=10))
        c.enqueue(Task("email:y", b""))
        SyncRunner(r).run(broker.dequeue_timed("default", lease_expiry=time.time() + 30, count=10))
        text = QueueStateCollector(insp).render().decode()
    assert 'asynqpy_queue_enqueue_refused_total{queue="billing"} 1\n' in text
    assert 'asynqpy_limit_waits_total{queue="default",limit="email:*"} 1\n' in text
    assert cli(capsys, redis_url, "queue", "limit", "billing", "--clear")[:2] == (0, "queue 'billing': limit removed\n")


def test_a_go_server_on_a_limited_queue_is_warned_about(capsys: pytest.CaptureFixture[str], redis_url: str,
                                                        r: redis.Redis) -> None:
    from asynqpy.rdb import keys
    from asynqpy.wire import ServerInfo
    c = Client(redis_url)
    c.enqueue(Task("email:a", b""))
    c.enqueue(Task("email:b", b""))
    cli(capsys, redis_url, "limit", "set", "email:*", "--concurrency", "1")
    # what a Go asynq server writes: its ServerInfo, no health record of ours
    key = keys.server_info("gohost", 42, "go-1")
    r.set(key, ServerInfo(host="gohost", pid=42, server_id="go-1", concurrency=10, queues={"default": 1},
                          status="active").SerializeToString())
    r.zadd(keys.SERVERS, {key: time.time() + 60})
    out = cli(capsys, redis_url, "limit", "ls")[1]
    assert "warning: server gohost:42 consumes default and looks like a Go asynq server" in out
    SyncRunner(r).run(broker.dequeue_timed("default", lease_expiry=time.time() + 30, count=10))
    waiting = r.lindex("asynqpy:{default}:lwait:email:*\n", 0).decode()
    out = cli(capsys, redis_url, "task", "explain", "default", waiting)[1]
    assert "Go workers do not obey asynqpy's limits" in out


def test_a_waiting_task_archived_then_run_again_starts_once(redis_url: str, r: redis.Redis) -> None:
    c = Client(redis_url)
    for i in range(4):
        c.enqueue(Task("email:x", b""), task_id=f"t{i}")
    insp = Inspector(redis_url)
    insp.set_limit(Limit("email:*", concurrency=2))

    def dequeue() -> list[str]:
        rows = SyncRunner(r).run(broker.dequeue_timed("default", lease_expiry=time.time() + 30, count=10))
        return [tid for tid, _, _ in rows]

    assert dequeue() == ["t0", "t1"]  # t2 and t3 wait on the limit
    insp.archive_task("default", "t3")
    insp.run_task("default", "t3")  # back to pending
    SyncRunner(r).run(broker.done("default", [("t0", ""), ("t1", "")], now=time.time()))
    insp.set_limit(Limit("email:*", concurrency=5))
    assert sorted(dequeue()) == ["t2", "t3"]  # t3 once, not from its stale wait-list entry and from pending too
    assert sorted(r.lrange(keys.active("default"), 0, -1)) == [b"t2", b"t3"]


def test_explain_of_a_waiting_task_counts_only_the_running_holders(redis_url: str, r: redis.Redis) -> None:
    c = Client(redis_url)
    for i in range(3):
        c.enqueue(Task("email:x", b""), task_id=f"t{i}")
    insp = Inspector(redis_url)
    insp.set_limit(Limit("email:*", concurrency=2))
    SyncRunner(r).run(broker.dequeue_timed("default", lease_expiry=time.time() + 30, count=10))
    assert "(2/2 running)" in str(insp.explain("default", "t2"))
    SyncRunner(r).run(broker.done("default", [("t0", ""), ("t1", "")], now=time.time()))
    assert "(0/2 running)" in str(insp.explain("default", "t2"))  # they finished: the next fetch starts t2


def test_a_waiting_task_deleted_or_archived_leaves_its_wait_list_and_the_queue_size(redis_url: str,
                                                                                   r: redis.Redis) -> None:
    c = Client(redis_url)
    for i in range(4):
        c.enqueue(Task("email:x", b"", headers={"tenant": "a"}), task_id=f"t{i}")
    insp = Inspector(redis_url)
    insp.set_limit(Limit("email:*", concurrency=1, key="header.tenant"))
    SyncRunner(r).run(broker.dequeue_timed("default", lease_expiry=time.time() + 30, count=10))  # t0 runs
    insp.set_queue_limit("default", max_size=3)
    insp.delete_task("default", "t2")  # in the middle of its wait list: no fetch would find it there soon
    insp.archive_task("default", "t3")
    wl = keys.limit_wait_list("default", "email:*\na")
    assert r.lrange(wl, 0, -1) == [b"t1"] and r.get("asynqpy:{default}:lwaitn") == b"1"
    c.enqueue(Task("other", b""))  # the queue holds t0 and t1 (and the archived t3): room for one more
    insp.delete_task("default", "t1")
    assert not r.exists(wl) and r.zcard(keys.limit_waiting("default")) == 0


def test_a_queue_whose_tasks_wait_on_a_limit_is_not_empty_and_force_deletes_them(redis_url: str,
                                                                                 r: redis.Redis) -> None:
    from asynqpy.errors import QueueNotEmptyError
    c = Client(redis_url)
    for i in range(8):
        c.enqueue(Task("email:x", b"", headers={"tenant": "ab"[i % 2]}), task_id=f"t{i}")
    insp = Inspector(redis_url, chunk=2)
    insp.set_limit(Limit("email:*", concurrency=1, key="header.tenant"))
    SyncRunner(r).run(broker.dequeue_timed("default", lease_expiry=time.time() + 30, count=10))  # t0, t1 run
    SyncRunner(r).run(broker.done("default", [("t0", ""), ("t1", "")], now=time.time()))
    with pytest.raises(QueueNotEmptyError):
        insp.delete_queue("default")  # its 6 tasks wait on the limit: out of pending, but there
    insp.delete_queue("default", force=True)  # in chunks of 2
    assert not [k for k in r.scan_iter(match="asynq:{default}:t:*")]
    assert not r.exists(keys.limit_waiting("default"), "asynqpy:{default}:lwaitn")
    Client(redis_url).enqueue(Task("new", b""), task_id="n")  # the name used again: none of them comes back
    rows = SyncRunner(r).run(broker.dequeue_timed("default", lease_expiry=time.time() + 30, count=10))
    assert [tid for tid, _, _ in rows] == ["n"]
