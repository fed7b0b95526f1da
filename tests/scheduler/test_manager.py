"""PeriodicTaskManager with the YAML file provider: changes picked up without a restart, a broken file keeps the
last good set running (logged and counted)."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis

from asynqpy.scheduler import ConfigError, PeriodicTaskManager, YamlFileProvider
from inspector import Inspector

from .clocks import SharedClock, shared_time, wait_for

GOOD = """
configs:
  - cronspec: "@every 1s"
    task_type: sync:orders
    options: {queue: cron, max_retry: 3, timeout: 1m30s}
  - cronspec: "CRON_TZ=Europe/Berlin 0 3 * * *"
    task_type: report:daily
    payload: {team: acme}
"""

CHANGED = """
configs:
  - cronspec: "@every 1s"
    task_type: sync:orders
    options: {queue: cron, max_retry: 3, timeout: 1m30s}
  - cronspec: "@hourly"
    task_type: cleanup
    options: {queue: low, retention: 24h}
"""



class Running:
    def __init__(self, manager: PeriodicTaskManager) -> None:
        self.manager = manager
        self.error: BaseException | None = None
        self.base: Any = None
        self.thread = threading.Thread(target=self._run)
        self.thread.start()

    def _run(self) -> None:
        try:
            asyncio.run(self.manager.arun())
        except BaseException as exc:
            self.error = exc

    def stop(self) -> None:
        self.manager.stop()
        self.thread.join(10)


@pytest.fixture
def cron_file(tmp_path: Path) -> Path:
    path = tmp_path / "cron.yaml"
    path.write_text(GOOD)
    return path


@pytest.fixture
def running(redis_url: str, cron_file: Path) -> Iterator[Running]:
    base = shared_time()
    m = PeriodicTaskManager(YamlFileProvider(cron_file), sync_interval=0.05, redis_url=redis_url,
                            clock=SharedClock(base), heartbeat_interval=3600)
    run = Running(m)
    run.base = base
    try:
        yield run
    finally:
        run.stop()


def listed(redis_url: str) -> list[tuple[str, str, tuple[str, ...]]]:
    with Inspector(redis_url) as insp:
        return [(e.spec, e.task_type, e.opts) for e in insp.scheduler_entries()]


def test_yaml_entries_run_and_show_in_the_inspector(running: Running, redis_url: str) -> None:
    got = wait_for(lambda: listed(redis_url), "entries")
    assert sorted(got) == [
        ("@every 1s", "sync:orders", ('Queue("cron")', "MaxRetry(3)", "Timeout(1m30s)")),
        ("CRON_TZ=Europe/Berlin 0 3 * * *", "report:daily", ()),
    ]
    with Inspector(redis_url) as insp:
        (daily,) = [e for e in insp.scheduler_entries() if e.task_type == "report:daily"]
    assert daily.task_payload == b'{"team":"acme"}'
    assert daily.next_enqueue_at is not None and daily.next_enqueue_at.astimezone().hour is not None


def test_changes_are_picked_up_and_a_broken_file_keeps_the_last_good_set(
        running: Running, redis_url: str, cron_file: Path, caplog: pytest.LogCaptureFixture) -> None:
    wait_for(lambda: len(listed(redis_url)) == 2, "the first set")
    cron_file.write_text(CHANGED)
    wait_for(lambda: {t for _, t, _ in listed(redis_url)} == {"sync:orders", "cleanup"}, "the changed set")
    (cleanup,) = [e for e in listed(redis_url) if e[1] == "cleanup"]
    assert cleanup == ("@hourly", "cleanup", ('Queue("low")', "Retention(24h0m0s)"))

    m = running.manager
    for broken, why in (("configs: [ {cronspec: '@daily'", "not valid YAML"),
                        ("configs:\n  - cronspec: '61 * * * *'\n    task_type: x\n", "'61' is outside 0-59"),
                        ("configs:\n  - cronspec: '@daily'\n    task_type: x\n    options: {priority: 3}\n",
                         "unknown option 'priority'")):
        failures = m.sync_failures
        cron_file.write_text(broken)
        wait_for(lambda w=why: w in (m.last_error or ""), f"the failure: {why}")  # type: ignore[misc]
        time.sleep(0.15)
        assert m.sync_failures > failures
        assert {t for _, t, _ in listed(redis_url)} == {"sync:orders", "cleanup"}
    assert "config sync failed" in caplog.text and "keeping the 2 entries running" in caplog.text
    cron_file.unlink()
    wait_for(lambda: "cannot read" in (m.last_error or ""), "a missing file to count as a failure")
    assert {t for _, t, _ in listed(redis_url)} == {"sync:orders", "cleanup"}
    r = redis.Redis.from_url(redis_url)
    running.base.value += 2  # the last good set keeps enqueueing
    wait_for(lambda: r.llen("asynq:{cron}:pending") == 2, "two ticks of sync:orders")
    r.close()
    cron_file.write_text(GOOD)
    wait_for(lambda: {t for _, t, _ in listed(redis_url)} == {"sync:orders", "report:daily"}, "the fixed file")
    assert m.last_error is None


def test_a_broken_file_at_start_is_a_clear_error(tmp_path: Path, redis_url: str) -> None:
    path = tmp_path / "cron.yaml"
    path.write_text("configs:\n  - cronspec: '@every 1 minute'\n    task_type: x\n")
    m = PeriodicTaskManager(YamlFileProvider(path), redis_url=redis_url)
    with pytest.raises(ConfigError, match=r"cron.yaml.*'@every 1 minute'"):
        m.run()
