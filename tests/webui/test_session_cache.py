"""Each app process keeps the sessions it checked in memory (inspector.webstate): a browser's polls cost Redis no
command for its session, yet a logout, a password change or a removal ends the session in every process within
the sessions epoch's recheck (1 s), a role change at once, and the idle and absolute timeouts hold exactly.

Two `asynqpy web` servers (gunicorn, one worker each) on one Redis stand for two workers, so a test knows which
one answers; the timeouts are tested on two apps in this process sharing a fake clock, over real HTTP."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import redis

from inspector.webstate import SessionStore
from tests.webui.authkit import PASSWORD, make_app
from tests.webui.livekit import Browser, Clock, serve
from webui.users import UsersFile, create_user

WINDOW = 1.0 + 2.0  # the default recheck, and room for a loaded machine
POLL = {"HX-Request": "true", "X-Asynqpy-Poll": "1"}  # a live refresh, as static/app.js sends it


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _start(redis_url: str, users: Path) -> tuple[subprocess.Popen[bytes], str]:
    port = _free_port()
    env = {k: v for k, v in os.environ.items() if k not in ("ASYNQPY_WEB_SECRET", "ASYNQPY_WEB_USERS")}
    proc = subprocess.Popen(
        [sys.executable, "-m", "asynqpy.cli", "web", "--bind", f"127.0.0.1:{port}", "--workers", "1",
         "--threads", "2", "--redis-url", redis_url, "--users", str(users)],
        cwd=users.parent, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True)
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 30
    while True:
        try:
            urllib.request.urlopen(base + "/healthz", timeout=2).close()
            return proc, base
        except OSError:
            if proc.poll() is not None or time.monotonic() > deadline:
                _stop(proc)
                raise AssertionError("asynqpy web did not start") from None
            time.sleep(0.2)


def _stop(proc: subprocess.Popen[bytes]) -> None:
    try:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=15)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    except ProcessLookupError:
        pass
    if proc.stderr:
        proc.stderr.close()


@pytest.fixture
def two_workers(redis_url: str, tmp_path: Path) -> Iterator[tuple[str, str, Path]]:
    """Two dashboard servers on one Redis, one users file and one generated key: (base A, base B, users file)."""
    users = tmp_path / "asynqpy-users.toml"
    create_user(users, "ann", "admin", PASSWORD)
    a, base_a = _start(redis_url, users)
    try:
        b, base_b = _start(redis_url, users)
        try:
            yield base_a, base_b, users
        finally:
            _stop(b)
    finally:
        _stop(a)


def _logged_in(base_a: str, base_b: str) -> tuple[Browser, Browser]:
    """ann logged in on A, and the same cookie on B, which has checked (and keeps) the session."""
    on_a = Browser(base_a)
    assert on_a.login("ann", PASSWORD).status == 303
    on_b = Browser(base_b)
    for cookie in on_a.jar:
        on_b.jar.set_cookie(cookie)
    assert {on_b.open("/servers", **POLL).status for _ in range(3)} == {200}
    return on_a, on_b


def _refused_within(b: Browser, window: float) -> float:
    """Seconds until B sends the cookie to the login page; fails when that takes longer than window."""
    t0 = time.monotonic()
    while True:
        status = b.open("/servers", **POLL).status
        if status == 401:  # htmx: sent to the login page
            return time.monotonic() - t0
        assert status == 200
        assert time.monotonic() - t0 < window, "the session outlived the recheck window"
        time.sleep(0.05)


@pytest.mark.slow
def test_a_logout_on_one_worker_ends_the_session_on_the_other(two_workers: tuple[str, str, Path]) -> None:
    base_a, base_b, _ = two_workers
    on_a, on_b = _logged_in(base_a, base_b)
    assert on_a.open("/logout", {"csrf_token": on_a.token()}).status == 303
    _refused_within(on_b, WINDOW)
    assert {on_b.open("/", **POLL).status for _ in range(3)} == {401}
    assert on_b.open("/").status == 303  # a page, not a poll: to the login form


@pytest.mark.slow
def test_a_password_change_ends_the_session_on_every_worker(two_workers: tuple[str, str, Path],
                                                            redis_url: str) -> None:
    base_a, base_b, users = two_workers
    _, on_b = _logged_in(base_a, base_b)
    done = subprocess.run([sys.executable, "-m", "asynqpy.cli", "user", "passwd", "ann", "--password-stdin",
                           "--users", str(users), "--redis-url", redis_url], input=f"new-{PASSWORD}\n".encode(),
                          capture_output=True, timeout=60)
    assert done.returncode == 0, done.stderr.decode()
    assert on_b.open("/servers", **POLL).status == 401  # the users file's stamp no longer matches: at once
    assert Browser(base_b).login("ann", f"new-{PASSWORD}").status == 303


@pytest.mark.slow
def test_a_role_change_takes_effect_at_once_on_every_worker(two_workers: tuple[str, str, Path]) -> None:
    base_a, base_b, users = two_workers
    on_a, on_b = _logged_in(base_a, base_b)
    assert on_b.open("/audit").status == 200
    UsersFile(users).set_role("ann", "viewer")  # as `asynqpy user role ann viewer` does
    assert on_b.open("/audit").status == 403
    assert on_a.open("/audit").status == 403
    UsersFile(users).remove("ann")
    assert on_b.open("/servers", **POLL).status == 401


def _two_apps(redis_url: str, users_path: Path, clock: Clock) -> tuple[object, object]:
    settings: dict[str, object] = {"ASYNQPY_CLOCK": clock, "ASYNQPY_SESSION_IDLE": 600,
                                   "ASYNQPY_SESSION_MAX_AGE": 1800}
    return make_app(redis_url, users_path, **settings), make_app(redis_url, users_path, **settings)


def _polls(b: Browser) -> int:
    return b.open("/servers", **POLL).status


def test_idle_timeout_holds_with_kept_sessions(redis_url: str, users_path: Path) -> None:
    clock = Clock()
    one, two = _two_apps(redis_url, users_path, clock)
    with serve(one) as base_a, serve(two) as base_b:
        on_a, on_b = _logged_in_in_process(base_a, base_b)
        for _ in range(3):  # polls on both, never activity: they do not extend the idle timeout
            clock.t += 199
            assert _polls(on_a) == 200 and _polls(on_b) == 200
        clock.t += 4  # 601 s after login, with only polls since
        assert _polls(on_b) == 401 and _polls(on_a) == 401


def test_activity_seen_by_another_worker_keeps_the_session(redis_url: str, users_path: Path) -> None:
    clock = Clock()
    one, two = _two_apps(redis_url, users_path, clock)
    with serve(one) as base_a, serve(two) as base_b:
        on_a, on_b = _logged_in_in_process(base_a, base_b)
        clock.t += 400
        assert on_a.open("/servers").status == 200  # a page view on A: activity (B's kept record says login)
        clock.t += 400  # idle by what B kept, not by Redis: B reads it again before refusing
        assert _polls(on_b) == 200
        assert on_b.open("/servers").status == 200  # activity on B
        clock.t += 400
        assert on_a.open("/servers").status == 200  # A's record says 800 s idle; Redis says 400 s
        clock.t += 599
        assert _polls(on_b) == 200
        clock.t += 1  # 1800 s after login: the absolute timeout, whatever the activity
        assert _polls(on_b) == 401 and _polls(on_a) == 401


def _logged_in_in_process(base_a: str, base_b: str) -> tuple[Browser, Browser]:
    on_a = Browser(base_a)
    assert on_a.login("vera").status == 303
    on_b = Browser(base_b)
    for cookie in on_a.jar:
        on_b.jar.set_cookie(cookie)
    assert _polls(on_b) == 200
    return on_a, on_b


def _calls(r: redis.Redis) -> dict[str, int]:
    return {k.removeprefix("cmdstat_"): int(v["calls"]) for k, v in r.info("commandstats").items()}


def _delta(r: redis.Redis, act: Callable[[], None]) -> tuple[dict[str, int], float]:
    before, t0 = _calls(r), time.monotonic()
    act()
    elapsed = time.monotonic() - t0
    after = _calls(r)
    return {k: n - before.get(k, 0) for k, n in after.items() if n - before.get(k, 0)}, elapsed


def test_polls_cost_redis_no_command_for_the_session(redis_url: str, users_path: Path, r: redis.Redis) -> None:
    app = make_app(redis_url, users_path, ASYNQPY_POLL_SECONDS=600)  # the page's reads: kept by the worker
    with serve(app) as base:
        b = Browser(base)
        assert b.login("vera").status == 303
        assert b.open("/servers").status == 200  # a page view reads the servers; the polls reuse that read
        polls = 40
        delta, elapsed = _delta(r, lambda: [_polls(b) for _ in range(polls)] and None)
    delta.pop("info", None)
    assert "hmget" not in delta and "evalsha" not in delta, delta  # no session read, no touch
    # What is left for the session is the sessions epoch: one GET per second at most, whatever the number of polls.
    assert delta.get("get", 0) <= elapsed / 1.0 + 1 < polls, (delta, elapsed)


def test_ending_a_users_sessions_reaches_every_process(r: redis.Redis) -> None:
    one, two = SessionStore(r, recheck=0), SessionStore(r, recheck=0)  # recheck 0: the epoch on every call
    s = one.create("ann", "stamp-1")
    assert two.get(s.id, touch=False) is not None  # two keeps it now
    assert one.end_user("ann") == 1
    assert two.get(s.id, touch=False) is None


def test_a_flushed_server_ends_the_sessions_a_process_keeps(r: redis.Redis) -> None:
    one, two = SessionStore(r, recheck=0), SessionStore(r, recheck=0)
    s = one.create("ann")
    assert two.get(s.id, touch=False) is not None
    r.delete(*r.keys("asynqpy:{web}:*"))  # as FLUSHDB or a restart without persistence would
    assert two.get(s.id, touch=False) is None  # the epoch is gone: what two kept is dropped
    again = one.create("ann")  # the new epoch starts at a random value, not where the old one was
    assert two.get(again.id, touch=False) is not None and two.get(s.id, touch=False) is None


def test_the_recheck_setting_is_checked(redis_url: str, users_path: Path) -> None:
    with pytest.raises(ValueError, match="ASYNQPY_SESSION_RECHECK"):
        make_app(redis_url, users_path, ASYNQPY_SESSION_RECHECK="soon")
