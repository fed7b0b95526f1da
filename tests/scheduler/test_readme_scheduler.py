"""The README's Scheduler section runs as written: its app module and its YAML file (against the test server)."""

from __future__ import annotations

import asyncio
import re
import threading
import time
from pathlib import Path

import pytest

from asynqpy.scheduler import PeriodicTaskManager, Scheduler, YamlFileProvider
from inspector import Inspector

README = Path(__file__).resolve().parents[2] / "README.md"


def section() -> str:
    text = README.read_text()
    start = text.index("## Scheduler")
    return text[start:text.index("\n## ", start + 1)]


def test_readme_scheduler_example_runs(redis_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    (code,) = re.findall(r"```python\n(.*?)```", section(), flags=re.S)
    ns: dict[str, object] = {}
    monkeypatch.setenv("ASYNQPY_REDIS_URL", redis_url)  # the example finds its Redis as a user's would
    exec(code, ns)
    scheduler = ns["scheduler"]
    assert isinstance(scheduler, Scheduler)
    thread = threading.Thread(target=lambda: asyncio.run(scheduler.arun()))
    thread.start()
    try:
        with Inspector(redis_url) as insp:
            deadline = time.monotonic() + 10
            while len(insp.scheduler_entries()) < 3 and time.monotonic() < deadline:
                time.sleep(0.02)
            assert sorted(e.task_type for e in insp.scheduler_entries()) == [
                "email:digest", "report:daily", "sync:orders"]
    finally:
        scheduler.stop()
        thread.join(10)


def test_readme_yaml_is_a_valid_config(tmp_path: Path, redis_url: str) -> None:
    (doc,) = re.findall(r"```yaml\n(.*?)```", section(), flags=re.S)
    path = tmp_path / "cron.yaml"
    path.write_text(doc)
    configs = YamlFileProvider(path).get_configs()
    assert [(c.cronspec, c.task.type, dict(c.options)) for c in configs] == [
        ("CRON_TZ=Europe/Berlin 0 3 * * *", "report:daily", {"queue": "cron", "max_retry": 3, "timeout": 600.0}),
        ("@every 30s", "sync:orders", {}),
    ]
    m = PeriodicTaskManager(YamlFileProvider(path), redis_url=redis_url)
    assert m.sync() and len(m.scheduler.entries()) == 2
