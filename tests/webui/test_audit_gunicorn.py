"""The audit trail under gunicorn (two workers) through real HTTP: a flood of anonymous failed logins from
several threads evicts no action, the workers share one generated audit key and anchor, and the CLI verifies
the chain with them."""

from __future__ import annotations

import json
import stat
import subprocess
import sys
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from asynqpy import Client, Task
from tests.webui.authkit import PASSWORDS
from tests.webui.livekit import Browser, two_workers

pytestmark = pytest.mark.slow
__all__ = ["two_workers"]  # a fixture


@pytest.fixture
def small_cap(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setenv("ASYNQPY_AUDIT_CAP", "20")  # read by `asynqpy web` when the two_workers fixture starts it
    yield


def _cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "asynqpy.cli", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=60)


def test_a_login_flood_evicts_no_action(small_cap: None, two_workers: tuple[str, Path], redis_url: str) -> None:
    base, folder = two_workers
    with Client(redis_url) as c:
        c.enqueue(Task("email", b"{}"), queue="billing")
    otto = Browser(base)
    assert otto.login("otto", PASSWORDS["otto"]).status == 303
    assert otto.open("/queues/billing/pause", {"csrf_token": otto.token()}).status == 200

    def guess(i: int) -> int:
        return Browser(base).login(f"victim{i % 3}", "guess").status

    with ThreadPoolExecutor(4) as pool:
        statuses = list(pool.map(guess, range(120)))
    assert set(statuses) <= {401, 429} and 429 in statuses

    key = folder / ".asynqpy-audit.key"
    assert key.exists() and stat.S_IMODE(key.stat().st_mode) == 0o600
    ls = _cli("audit", "ls", "--user", "otto", "--json", "--redis-url", redis_url, cwd=folder)
    assert [json.loads(x)["action"] for x in ls.stdout.splitlines()] == ["login", "queue.pause"], ls.stderr
    ok = _cli("audit", "verify", "--redis-url", redis_url, "--audit-dir", str(folder), cwd=folder)
    assert ok.returncode == 0 and "intact: 2 record(s), seq 1..2" in ok.stdout, ok.stdout + ok.stderr
    refused = _cli("audit", "refused", "--json", "--redis-url", redis_url, cwd=folder)
    counts = [json.loads(x) for x in refused.stdout.splitlines()]
    assert sum(x["count"] for x in counts) == 120
    # At most 6 aggregates (3 accounts, failed or throttled) in each 5-minute window; the flood may straddle two.
    assert max(Counter(x["window"] for x in counts).values()) <= 6
    assert {x["action"] for x in counts} == {"login.failed"} and {x["addr"] for x in counts} == {"127.0.0.1"}
