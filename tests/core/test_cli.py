"""The `asynqpy` command: worker (one and several processes), dev, and one-line errors."""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import redis

import asynqpy
from asynqpy import Client, Task
from asynqpy.rdb import keys
from tests.core import procs
from tests.core.apps import SEEN
from tests.helpers import wait_for

ROOT = Path(__file__).resolve().parents[2]
ASYNQPY = [sys.executable, "-m", "asynqpy.cli"]


def run(*args: str, **kw) -> subprocess.CompletedProcess:  # type: ignore[no-untyped-def,type-arg]
    return subprocess.run([*ASYNQPY, *args], cwd=ROOT, capture_output=True, text=True, timeout=60, **kw)


def test_worker_with_processes_serves_and_stops_on_sigterm(redis_url: str, r: redis.Redis) -> None:
    Client(redis_url).enqueue_many([Task("count", b"")] * 200, queue="cli")
    env = {**os.environ, "TEST_REDIS_URL": redis_url}
    p = subprocess.Popen([*ASYNQPY, "worker", "tests.core.apps:counting", "--redis-url", redis_url,
                          "--queues", "cli=1", "--processes", "2", "--concurrency", "4"], cwd=ROOT, env=env,
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        wait_for(lambda: r.hlen(SEEN) == 200, timeout=60, what="200 tasks")
        wait_for(lambda: r.zcard(keys.SERVERS) == 2, timeout=20, what="two servers registered")
    finally:
        p.send_signal(signal.SIGTERM)
        out, _ = p.communicate(timeout=60)
    assert p.returncode == 0, out
    assert "supervising 2 worker processes" in out
    assert set(r.hvals(SEEN)) == {b"1"}
    wait_for(lambda: r.zcard(keys.SERVERS) == 0, timeout=5, what="servers to clear their state")


def test_bad_mux_and_queues_are_one_line_errors() -> None:
    res = run("worker", "no_such_module:mux")
    assert res.returncode == 2 and res.stderr.strip().count("\n") == 0
    assert "cannot import 'no_such_module'" in res.stderr
    res = run("worker", "tests.core.apps:counting", "--queues", "a=x")
    assert res.returncode == 2 and "priority of queue 'a'" in res.stderr
    res = run("worker", "tests.core.apps", "--queues", "a=1")
    assert res.returncode == 2 and "module:attribute" in res.stderr
    # A bad setting is a usage error, before any process starts.
    res = run("worker", "tests.core.apps:counting", "--concurrency", "0", "--processes", "2")
    assert res.returncode == 2 and "argument --concurrency: must be at least 1, got 0" in res.stderr


def test_worker_on_unreachable_redis_is_one_line(tmp_path: Path) -> None:
    res = run("worker", "tests.core.apps:counting", "--redis-url", "redis://127.0.0.1:1/0")
    assert res.returncode == 1 and "cannot reach Redis" in res.stderr and "Traceback" not in res.stderr


def test_worker_exits_after_shutdown_timeout_despite_a_stuck_plain_handler(redis_url: str, r: redis.Redis) -> None:
    from tests.core.apps import STARTS

    tid = Client(redis_url).enqueue(Task("stuck", b"")).id
    env = {**os.environ, "TEST_REDIS_URL": redis_url}
    p = subprocess.Popen([*ASYNQPY, "worker", "tests.core.apps:stuck", "--redis-url", redis_url,
                          "--shutdown-timeout", "0.5"], cwd=ROOT, env=env, stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, text=True)
    try:
        wait_for(lambda: r.llen(STARTS) == 1, timeout=20, what="the handler to start")
        p.send_signal(signal.SIGTERM)
        out, _ = p.communicate(timeout=30)  # not the handler's 120 s
    finally:
        if p.poll() is None:
            p.kill()
    assert p.returncode == 0, out
    assert "still running after shutdown" in out
    assert r.lrange(keys.pending("default"), 0, -1) == [tid.encode()]  # requeued for another worker


# -- errors: ours are one line, a bug (ours or in the user's module) shows its traceback --------------------------

def _module(tmp_path: Path, name: str, text: str) -> Path:
    (tmp_path / f"{name}.py").write_text(text)
    return tmp_path


def test_an_error_in_the_users_handler_module_shows_its_traceback(tmp_path: Path) -> None:
    _module(tmp_path, "brokenapp", "from asynqpy import ServeMux\nmux = ServeMux()\nraise ValueError('bad config')\n")
    res = procs.run("worker", "brokenapp:mux", "--redis-url", "redis://127.0.0.1:1/0", cwd=tmp_path)
    assert res.returncode == 1 and "Traceback" in res.stderr, res
    assert 'brokenapp.py", line 3' in res.stderr and "ValueError: bad config" in res.stderr
    # a missing dependency of the module is the module's error too, not "cannot import brokenapp2"
    _module(tmp_path, "brokenapp2", "import no_such_dependency_xyz\n")
    res = procs.run("worker", "brokenapp2:mux", cwd=tmp_path)
    assert res.returncode == 1 and "Traceback" in res.stderr and "no_such_dependency_xyz" in res.stderr


def test_a_mux_without_handlers_is_refused_before_any_task_fails(tmp_path: Path) -> None:
    _module(tmp_path, "emptyapp", "from asynqpy import ServeMux\nmux = ServeMux()\n")
    _module(tmp_path, "catchall", "from asynqpy import ServeMux\nmux = ServeMux()\n"
                                  "async def answer(task, call_next):\n    return None\nmux.use(answer)\n")
    for spec in ("emptyapp:mux", "asynqpy:ServeMux"):  # the class itself is called like a factory
        res = procs.run("worker", spec, "--redis-url", "redis://127.0.0.1:1/0", cwd=tmp_path)
        assert res.returncode == 2 and res.stderr.count("\n") == 1, res
        assert res.stderr.startswith(f"asynqpy: {spec} has no handlers: ") and "handler not found" in res.stderr
    # middleware may answer every task itself: such a mux starts (and here finds no Redis: exit 1)
    res = procs.run("worker", "catchall:mux", "--redis-url", "redis://127.0.0.1:1/0", cwd=tmp_path)
    assert res.returncode == 1 and "has no handlers" not in res.stderr, res


def test_our_errors_are_one_line_unless_debug(tmp_path: Path) -> None:
    res = procs.run("worker", "no_such_module:mux", cwd=tmp_path)
    assert res.returncode == 2 and res.stderr.count("\n") == 1 and "Traceback" not in res.stderr
    for how in (["--debug", "worker", "no_such_module:mux"], ["worker", "no_such_module:mux", "--debug"]):
        res = procs.run(*how, cwd=tmp_path)
        assert res.returncode == 2 and "Traceback" in res.stderr and "UsageError" in res.stderr, res
    res = procs.run("worker", "no_such_module:mux", cwd=tmp_path, ASYNQPY_DEBUG="1")
    assert res.returncode == 2 and "Traceback" in res.stderr
    res = procs.run("task", "info", "nope", "x", "--redis-url", "redis://127.0.0.1:1/0", cwd=tmp_path)
    assert res.returncode == 1 and res.stderr.count("\n") == 1 and "cannot reach Redis" in res.stderr


# -- help, version, common options -----------------------------------------------------------------------------

def _leaf_parsers() -> list[argparse.ArgumentParser]:
    from asynqpy.cli import build_parser
    from asynqpy.clicommon import subparsers_of

    return [build_parser(), *subparsers_of(build_parser())]


def test_version_and_dev_help() -> None:
    res = run("--version")
    assert res.returncode == 0 and res.stdout.strip() == f"asynqpy {asynqpy.__version__}"
    res = run("dev", "--help")
    assert res.returncode == 0 and "Start everything for local development" in res.stdout
    from asynqpy.plugins import dev_addons

    # --web-port comes from the dashboard add-on only: present exactly when that add-on is installed
    assert ("--web-port" in res.stdout) == any(a.name == "dashboard" for a in dev_addons())
    assert "--redis-only" in res.stdout


def test_every_argument_has_help_text() -> None:
    missing = [f"{p.prog} {a.dest}" for p in _leaf_parsers() for a in p._actions
               if not a.help and not isinstance(a, argparse._SubParsersAction)]
    assert missing == []
    assert all(p.description or p.prog == "asynqpy" for p in _leaf_parsers() if not any(
        isinstance(a, argparse._SubParsersAction) for a in p._actions)), "a command without a description"


def test_common_options_go_before_or_after_the_command(redis_url: str) -> None:
    Client(redis_url).enqueue(Task("t", b""), queue="here")
    for argv in (["--redis-url", redis_url, "stats"], ["stats", "--redis-url", redis_url],
                 ["--json", "--redis-url", redis_url, "queue", "ls"],
                 ["queue", "ls", "--json", "--redis-url", redis_url]):
        res = run(*argv)
        assert res.returncode == 0 and "here" in res.stdout, (argv, res)
    res = run("--json", "--redis-url", redis_url, "queue", "ls")
    assert json.loads(res.stdout)[0]["queue"] == "here"


def test_server_ls_shows_a_worker_as_soon_as_it_says_started(redis_url: str, tmp_path: Path) -> None:
    with procs.Proc.asynqpy("worker", "asynqpy.demo:mux", "--redis-url", redis_url, "--queues", "x=1",
                            cwd=tmp_path) as w:
        w.wait_for("started: pid")
        res = run("server", "ls", "--redis-url", redis_url)
        assert res.returncode == 0 and f":{w.p.pid} " in res.stdout and "active" in res.stdout, res
        code, out = w.stop(signal.SIGTERM)
    assert code == 0 and "asynqpy: asynqpy:" not in out, out


def test_a_registered_command_with_its_own_redis_url_option_takes_the_global_one_too() -> None:
    from asynqpy.clicommon import add_common_everywhere

    parser = argparse.ArgumentParser(prog="asynqpy")
    sub = parser.add_subparsers(dest="command")
    web = sub.add_parser("web")
    web.add_argument("--redis-url", help="the dashboard's Redis")  # default None, as a plugin might write it
    add_common_everywhere(parser)
    assert parser.parse_args(["--redis-url", "redis://a/0", "web"]).redis_url == "redis://a/0"
    assert parser.parse_args(["web", "--redis-url", "redis://b/0"]).redis_url == "redis://b/0"
    assert parser.parse_args(["web"]).redis_url is None
    assert parser.parse_args(["--json", "web"]).json is True
