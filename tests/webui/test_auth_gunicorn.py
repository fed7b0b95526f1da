"""Auth through real HTTP against `asynqpy web` under gunicorn with two workers: the generated key file is shared,
so a login made in one worker holds in the other; logout ends the session in both (within the second each worker
takes to notice: inspector.webstate); throttling is shared."""

from __future__ import annotations

import stat
import time
from pathlib import Path

import pytest

from tests.webui.authkit import PASSWORDS
from tests.webui.livekit import Browser, two_workers

pytestmark = pytest.mark.slow
__all__ = ["two_workers"]  # a fixture


def test_sessions_hold_across_workers_and_end_at_logout(two_workers: tuple[str, Path]) -> None:
    base, folder = two_workers
    key = folder / ".asynqpy-web.key"
    assert key.exists() and stat.S_IMODE(key.stat().st_mode) == 0o600
    b = Browser(base)
    assert b.login("otto", PASSWORDS["otto"]).status == 303
    statuses = {b.open("/").status for _ in range(12)}  # gunicorn spreads these over both workers
    assert statuses == {200}
    thief = Browser(base)
    for cookie in b.jar:
        thief.jar.set_cookie(cookie)
    assert thief.open("/").status == 200
    assert b.open("/logout", {"csrf_token": b.token()}).status == 303
    deadline = time.monotonic() + 1.0 + 2.0  # each worker rereads the sessions epoch every second
    while thief.open("/").status != 303:
        assert time.monotonic() < deadline, "the session outlived the recheck window"
        time.sleep(0.05)
    assert {thief.open("/").status for _ in range(6)} == {303}


def test_throttling_is_shared_by_the_workers(two_workers: tuple[str, Path]) -> None:
    base, _ = two_workers
    for _ in range(5):
        assert Browser(base).login("otto", "wrong").status == 401
    assert {Browser(base).login("otto", PASSWORDS["otto"]).status for _ in range(4)} == {429}
