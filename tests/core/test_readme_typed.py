"""The README's "Tasks as functions" examples run as written (against the test server)."""

from __future__ import annotations

import re
import sys
import types
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from asynqpy import Client
from asynqpy.rdb import keys
from asynqpy.wire import decode_task_message
from tests.helpers import running, wait_for

README = Path(__file__).resolve().parents[2] / "README.md"


def section_blocks() -> list[str]:
    text = README.read_text()
    start = text.index("\n## Tasks as functions\n")
    end = text.index("\n## ", start + 1)
    return re.findall(r"```python\n(.*?)```", text[start:end], flags=re.S)


def module(name: str, code: str) -> types.ModuleType:
    mod = types.ModuleType(name)
    sys.modules[name] = mod
    exec(code, mod.__dict__)
    return mod


@pytest.fixture
def clean_modules() -> Iterator[None]:
    saved = {name: sys.modules.get(name) for name in ("app", "app.tasks")}
    yield
    sys.modules.pop("readme_versions", None)
    for name, mod in saved.items():
        if mod is None:
            sys.modules.pop(name, None)
        else:
            sys.modules[name] = mod


def quick_start_tasks() -> str:
    text = README.read_text()
    start = text.index("\n## Quick start\n")
    return next(b for b in re.findall(r"```python\n(.*?)```", text[start:], flags=re.S) if b.startswith("# app/tasks"))


def test_tasks_module_and_producer(redis_url: str, r: redis.Redis, capsys: pytest.CaptureFixture[str],
                                   clean_modules: None, monkeypatch: pytest.MonkeyPatch) -> None:
    """The typed tasks continue the Quick start's app/tasks.py (one module, one mux), and the producer uses the
    default URL resolution, as the Quick start's does."""
    tasks_code, producer, _ = section_blocks()
    assert tasks_code.startswith("# app/tasks.py, continued") and "ServeMux()" not in tasks_code
    assert "redis://" not in producer
    monkeypatch.setenv("REDIS_URL", redis_url)
    app = types.ModuleType("app")
    app.__path__ = []  # a package, as app/ is
    sys.modules["app"] = app
    tasks = module("app.tasks", quick_start_tasks() + "\n" + tasks_code)
    exec(producer, {})
    assert capsys.readouterr().out == "too - send_welcome() got an unexpected argument 'too'\n"
    assert tasks.outbox == ["Welcome, there <test@example.com>"]  # the plain call
    assert r.llen(keys.pending("critical")) == 1 and r.zcard(keys.scheduled("critical")) == 1
    assert r.llen(keys.pending("low")) == 1 and r.llen(keys.pending("default")) == 1
    (ada,) = r.lrange(keys.pending("critical"), 0, -1)
    msg = decode_task_message(r.hget(keys.task("critical", ada.decode()), "msg"))
    assert (msg.payload, msg.retry) == (b'{"to":"ada@example.com","name":"Ada"}', 5)
    tasks.outbox.clear()
    with running(redis_url, tasks.mux, queues={"critical": 3, "low": 1, "default": 1}):
        wait_for(lambda: len(tasks.outbox) == 3, what="three typed calls")
    welcomes = sorted(m for m in tasks.outbox if m.startswith("Welcome"))
    (invoice,) = (m for m in tasks.outbox if not m.startswith("Welcome"))
    assert welcomes == ["Welcome, Ada <ada@example.com>", "Welcome, there <eve@example.com>"]
    assert re.fullmatch(r"[0-9a-f-]{36} Decimal\('19.90'\) \d{4}-\d\d-\d\d PRO A-1", invoice)


def test_versioned_task_types_side_by_side(redis_url: str, clean_modules: None) -> None:
    *_, versions = section_blocks()
    mod = module("readme_versions", versions)
    with Client(redis_url) as client:
        mod.deliver_report_v1.enqueue(client, 3)          # an old producer
        mod.deliver_report.enqueue(client, 7, ["email", "slack"])
    with running(redis_url, mod.mux):
        wait_for(lambda: len(mod.delivered) == 2, what="both versions delivered")
    assert sorted(mod.delivered) == [(3, ["email"]), (7, ["email", "slack"])]
