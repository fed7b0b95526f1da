"""asynqpy.testing: the plugin's fixtures, TestWorker.drain/advance on a real server, and run_task."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest
import redis

from asynqpy import Client, InvalidArgumentError, ReceivedTask, RevokeTask, ServeMux, SkipRetry, Task
from asynqpy.embedded import EmbeddedServer, free_port
from asynqpy.testing import DrainTimeout, TestWorker, run_task, run_task_async
from asynqpy.testing.server import ForeignDataError, check_owned
from asynqpy.typed import task

REPO = Path(__file__).resolve().parents[2]
Worker = Callable[..., TestWorker]


def flaky_mux(fail_times: int) -> tuple[ServeMux, list[int]]:
    mux = ServeMux()
    seen: list[int] = []

    @mux.handler("flaky")
    def flaky(task: ReceivedTask) -> None:
        seen.append(task.retry_count)
        if len(seen) <= fail_times:
            raise RuntimeError(f"boom {len(seen)}")
        task.write_result(b"done at attempt %d" % len(seen))
    return mux, seen


def test_drain_with_advance_time_runs_a_retry_without_waiting_its_backoff(asynqpy_client: Client,
                                                                         asynqpy_worker: Worker) -> None:
    mux, seen = flaky_mux(fail_times=1)
    worker = asynqpy_worker(mux)
    info = asynqpy_client.enqueue(Task("flaky", b""))
    started = time.monotonic()
    report = worker.drain(advance_time=True, timeout=10)
    run = report[info.id]
    assert run.outcomes == ["retry", "success"]
    assert run.retries == 1
    assert run.outcome == "success" and run.error == ""
    assert run.attempts[0].error == "RuntimeError: boom 1"
    assert run.result == b"done at attempt 2"
    assert seen == [0, 1]
    assert time.monotonic() - started < 10  # asynq's first backoff is 15 s or more: advance moved it


def test_drain_stops_at_a_retry_due_later_until_advanced(asynqpy_client: Client, asynqpy_worker: Worker) -> None:
    mux, _ = flaky_mux(fail_times=1)
    worker = asynqpy_worker(mux)
    info = asynqpy_client.enqueue(Task("flaky", b""))
    first = worker.drain()
    assert first[info.id].outcomes == ["retry"]
    assert worker.advance(3600) == 1
    second = worker.drain()
    assert second.one("flaky").outcomes == ["success"]  # a report covers the tasks run during that drain


def test_a_task_out_of_retries_is_archived_and_skip_retry_archives_at_once(asynqpy_client: Client,
                                                                          asynqpy_worker: Worker) -> None:
    mux = ServeMux()

    @mux.handler("always")
    def always(task: ReceivedTask) -> None:
        raise ValueError("no")

    @mux.handler("skip")
    def skip(task: ReceivedTask) -> None:
        raise SkipRetry("bad input")
    worker = asynqpy_worker(mux)
    a = asynqpy_client.enqueue(Task("always"), max_retry=2)
    s = asynqpy_client.enqueue(Task("skip"))
    report = worker.drain(advance_time=True)
    assert report[a.id].outcomes == ["retry", "retry", "archived"]
    assert report[a.id].error == "ValueError: no"
    assert report[s.id].outcomes == ["archived"] and "bad input" in report[s.id].error


def test_scheduled_task_runs_only_once_time_is_advanced(asynqpy_client: Client, asynqpy_worker: Worker) -> None:
    mux = ServeMux()
    mux.handle("later", lambda task: None)
    worker = asynqpy_worker(mux)
    info = asynqpy_client.enqueue(Task("later"), process_in=600)
    assert len(worker.drain()) == 0  # due in ten minutes: not yet
    assert worker.drain(advance_time=True)[info.id].outcome == "success"


def test_typed_task_enqueue_then_drain_and_a_payload_that_does_not_fit(asynqpy_client: Client,
                                                                      asynqpy_worker: Worker) -> None:
    mux = ServeMux()
    sent: list[tuple[str, int]] = []

    @mux.task("invoice:send")
    def invoice(customer: str, cents: int) -> None:
        sent.append((customer, cents))
    worker = asynqpy_worker(mux)
    good = invoice.enqueue(asynqpy_client, "acme", cents=1200)
    bad = asynqpy_client.enqueue(Task("invoice:send", b'{"customer": "acme", "cents": "lots"}'))
    report = worker.drain()
    assert report[good.id].outcome == "success" and sent == [("acme", 1200)]
    assert report[bad.id].outcomes == ["archived"]  # no retries: it can never fit
    assert "cents" in report[bad.id].error


def test_drain_times_out_saying_what_is_left(asynqpy_client: Client, asynqpy_worker: Worker) -> None:
    mux = ServeMux()
    release = threading.Event()

    @mux.handler("slow")
    def slow(task: ReceivedTask) -> None:
        release.wait(5)
    worker = asynqpy_worker(mux)
    info = asynqpy_client.enqueue(Task("slow"))
    with pytest.raises(DrainTimeout, match="1 pending or active") as err:
        worker.drain(timeout=0.3)
    assert f"slow {info.id}" in str(err.value)  # the task left, by type and id (pending or already active)
    release.set()
    assert worker.drain().one().outcome == "success"


def test_the_worker_serves_the_queues_its_typed_tasks_enqueue_into(asynqpy_client: Client,
                                                                   asynqpy_worker: Worker) -> None:
    mux = ServeMux()
    sent: list[str] = []

    @mux.task("email:welcome", queue="critical")  # as in the README's "Tasks as functions"
    def send_welcome(to: str) -> None:
        sent.append(to)
    worker = asynqpy_worker(mux)
    assert worker.queues == ["default", "critical"]
    info = send_welcome.enqueue(asynqpy_client, "ada@example.com")
    assert worker.drain()[info.id].outcome == "success"  # was an empty report: 'critical' was not served
    assert sent == ["ada@example.com"]
    assert asynqpy_worker(mux, queues={"low": 1}).queues == ["low"]  # queues given: those alone


def test_drain_and_advance_refuse_a_queue_the_worker_does_not_serve(asynqpy_client: Client,
                                                                    asynqpy_worker: Worker) -> None:
    mux = ServeMux()
    mux.handle("x", lambda task: None)
    worker = asynqpy_worker(mux)
    asynqpy_client.enqueue(Task("x"), queue="other")
    with pytest.raises(InvalidArgumentError, match="'other'") as err:
        worker.drain(queues=["other"])  # would wait for its timeout: nothing runs that queue's tasks
    assert err.value.argument == "queues"
    with pytest.raises(InvalidArgumentError, match="'other'"):
        worker.advance(60, queues=["other"])
    info = asynqpy_client.enqueue(Task("x"))
    assert worker.drain(queues="default")[info.id].outcome == "success"  # one name, not its letters


@pytest.mark.parametrize("seconds", [float("nan"), "60", True, None, 0, -5])
def test_advance_refuses_what_is_not_a_positive_number(asynqpy_worker: Worker, seconds: object) -> None:
    worker = asynqpy_worker(ServeMux())
    with pytest.raises(InvalidArgumentError) as err:
        worker.advance(seconds)  # type: ignore[arg-type]
    assert err.value.argument == "seconds"


def test_advance_by_infinity_makes_everything_due(asynqpy_client: Client, asynqpy_worker: Worker) -> None:
    mux = ServeMux()
    mux.handle("later", lambda task: None)
    worker = asynqpy_worker(mux)
    info = asynqpy_client.enqueue(Task("later"), process_in=10**9)
    assert worker.advance(float("inf")) == 1
    assert worker.drain()[info.id].outcome == "success"


def test_a_worker_stopped_by_the_test_is_not_stopped_again_by_the_fixture(asynqpy_worker: Worker) -> None:
    worker = asynqpy_worker(ServeMux())
    worker.stop()
    worker.stop()  # and once more by the fixture's teardown: "Event loop is closed" before


def test_a_worker_of_something_else_than_a_mux_is_refused(asynqpy_worker: Worker) -> None:
    @task("t:one")
    def one() -> None: ...
    for what, words in [(one, "mux.handle('t:one', one)"), (lambda t: None, "not function")]:
        with pytest.raises(InvalidArgumentError) as err:
            asynqpy_worker(what)
        assert err.value.argument == "mux" and words in str(err.value)


def test_asynqpy_inspector_sees_the_test_database(asynqpy_client: Client, asynqpy_inspector: object) -> None:
    info = asynqpy_client.enqueue(Task("seen"), queue="q1")
    got = asynqpy_inspector.get_task("q1", info.id)  # type: ignore[attr-defined]
    assert got.id == info.id and got.state == "pending"


def test_run_task_outcomes_as_a_server_decides_them() -> None:
    def fails(task: ReceivedTask) -> None:
        raise RuntimeError("down")
    first = run_task(fails, Task("t"), retry_count=0, max_retry=3)
    assert first.outcome == "retry" and first.error == "RuntimeError: down" and first.retry_delay > 0
    assert isinstance(first.exception, RuntimeError)
    assert run_task(fails, Task("t"), retry_count=3, max_retry=3).outcome == "archived"

    def revoke(task: ReceivedTask) -> None:
        raise RevokeTask("stale")
    assert run_task(revoke, Task("t")).outcome == "revoked"

    def writes(task: ReceivedTask) -> int:
        task.write_result(task.payload.upper())
        return task.retry_count
    ok = run_task(writes, Task("t", b"abc"), retry_count=2)
    assert (ok.outcome, ok.result, ok.value) == ("success", b"ABC", 2)


def test_run_task_gives_a_real_deadline_and_cancels_at_it() -> None:
    seen: dict[str, object] = {}

    def waits(task: ReceivedTask) -> None:
        seen["deadline_in"] = task.deadline.timestamp() - time.time()
        seen["cancelled"] = task.cancelled.wait(5)
    res = run_task(waits, Task("t"), timeout=0.2)
    assert res.outcome == "retry" and res.error == "context deadline exceeded"
    assert seen["cancelled"] is True
    assert 0 < seen["deadline_in"] <= 0.2  # type: ignore[operator]


def test_run_task_returns_at_its_timeout_from_a_plain_handler_that_ignores_it() -> None:
    release = threading.Event()
    finished = threading.Event()

    def deaf(task: ReceivedTask) -> None:  # never looks at task.cancelled (a deadlock, say)
        release.wait(10)
        finished.set()
    try:
        res = run_task(deaf, Task("t"), timeout=0.2)
        # given up at its deadline, as a server gives it up; before, run_task waited for the handler to return
        assert not finished.is_set()
        assert res.outcome == "retry" and res.error == "context deadline exceeded"
    finally:
        release.set()
    assert finished.wait(10)


def test_run_task_routes_through_a_mux_with_its_middleware_and_typed_tasks() -> None:
    mux = ServeMux()
    calls: list[str] = []

    async def mw(task: ReceivedTask, nxt: object) -> object:
        calls.append("mw")
        return await nxt(task)  # type: ignore[operator]
    mux.use(mw)

    @mux.task("add")
    async def add(a: int, b: int) -> int:
        return a + b
    assert run_task(mux, Task("add", b'{"a": 1, "b": 2}')).value == 3
    assert calls == ["mw"]
    bad = run_task(add, Task("add", b'{"a": 1}'))
    assert bad.outcome == "archived" and "b" in bad.error and "missing" in bad.error
    assert asyncio.run(run_task_async(add, Task("add", b'{"a": 2, "b": 2}'))).value == 4
    with pytest.raises(RuntimeError, match="run_task_async"):
        asyncio.run(_call_sync_inside_a_loop(add))


async def _call_sync_inside_a_loop(add: object) -> None:
    run_task(add, Task("add", b'{"a": 1, "b": 2}'))  # type: ignore[arg-type]


def test_the_plugin_starts_no_server_for_tests_that_ask_for_none(tmp_path: Path) -> None:
    (tmp_path / "test_plain.py").write_text(
        "import os\n"
        "def test_no_child_processes():\n"
        "    pid = os.getpid()\n"
        "    assert open(f'/proc/{pid}/task/{pid}/children').read().split() == []\n")
    env = {k: v for k, v in os.environ.items() if k != "ASYNQPY_TEST_REDIS_URL"}
    out = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_plain.py"],
                         cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stdout + out.stderr


def test_a_users_project_is_refused_a_test_database_holding_foreign_keys(tmp_path: Path) -> None:
    (tmp_path / "test_uses_redis.py").write_text(
        "def test_it(asynqpy_client):\n"
        "    pass\n")
    with EmbeddedServer() as other:  # stands for a developer's own Redis
        db15 = redis.Redis.from_url(other.url.rsplit("/", 1)[0] + "/15")
        db15.set("precious", "a developer's data")
        env = {**os.environ, "ASYNQPY_TEST_REDIS_URL": other.url}
        out = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_uses_redis.py"],
                             cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
        assert out.returncode == 2, out.stdout + out.stderr
        assert "holds 1 keys the tests did not write" in out.stdout + out.stderr
        assert db15.get("precious") == b"a developer's data"
        db15.delete("precious")
        out = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_uses_redis.py"],
                             cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
        assert out.returncode == 0, out.stdout + out.stderr
        assert db15.keys("*") == [b"asynqpy:tests:owned"]
        db15.close()


def test_a_test_server_that_cannot_be_reached_is_refused_saying_so() -> None:
    url = f"redis://:secret@127.0.0.1:{free_port()}/15"
    with pytest.raises(ForeignDataError, match=r"ASYNQPY_TEST_REDIS_URL=redis://:\*\*\*@127\.0\.0\.1:\d+/15: "
                                               r"cannot reach that server: ") as info:
        check_owned(url)
    assert "secret" not in str(info.value)


def test_under_xdist_each_worker_has_its_own_server_and_a_named_one_is_refused(tmp_path: Path) -> None:
    for n in (1, 2):  # one file per worker (--dist loadfile); each test waits until both have their server
        (tmp_path / f"test_w{n}.py").write_text(
            "import pathlib, time\n"
            f"def test_it(asynqpy_redis, tmp_path_factory):\n"
            f"    pathlib.Path({str(tmp_path)!r}, 'url{n}').write_text(asynqpy_redis)\n"
            f"    other = pathlib.Path({str(tmp_path)!r}, 'url{3 - n}')\n"
            "    deadline = time.monotonic() + 60\n"
            "    while not other.exists() and time.monotonic() < deadline:\n"
            "        time.sleep(0.05)\n"
            "    assert other.exists()\n")
    argv = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-n", "2", "--dist", "loadfile"]
    env = {k: v for k, v in os.environ.items() if k != "ASYNQPY_TEST_REDIS_URL"}
    out = subprocess.run(argv, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stdout + out.stderr
    assert (tmp_path / "url1").read_text() != (tmp_path / "url2").read_text()  # two servers, both up at once
    with EmbeddedServer() as other:
        out = subprocess.run(argv, cwd=tmp_path, env={**env, "ASYNQPY_TEST_REDIS_URL": other.url},
                             capture_output=True, text=True, timeout=120)
        assert out.returncode == pytest.ExitCode.USAGE_ERROR, out.stdout + out.stderr
        assert "ASYNQPY_TEST_REDIS_URL names one database" in out.stdout + out.stderr
        assert redis.Redis.from_url(other.url.rsplit("/", 1)[0] + "/15").dbsize() == 0  # nothing flushed or written
