"""Typed tasks' payloads are shown as the call they stand for when their type is registered, JSON otherwise."""

from __future__ import annotations

import asyncio
import importlib
import json
import sys
import threading
import time
from collections.abc import Iterator
from datetime import date

import pytest

from asynqpy import Client, ServeMux, Task, TaskState, typed
from asynqpy.scheduler import Scheduler
from inspector.api import Inspector
from inspector.cli import main
from inspector.display import preview, view

MODULE = "tests.inspector.typed_tasks"


@pytest.fixture
def unregistered() -> Iterator[None]:
    """The test tasks module is not imported (nor registered) at the start, and forgotten after."""
    saved = dict(typed._REGISTRY)
    typed._REGISTRY.pop("insp:invoice", None)
    sys.modules.pop(MODULE, None)
    yield
    typed._REGISTRY.clear()
    typed._REGISTRY.update(saved)
    sys.modules.pop(MODULE, None)


def test_display_forms() -> None:
    mux = ServeMux()

    @mux.task("disp:welcome")
    def send_welcome(to: str, name: str = "there") -> None: ...

    payload = send_welcome.to_task("ada@example.com").payload
    v = view(payload, task_type="disp:welcome")
    assert (v.kind, v.text, v.size, v.truncated) == ("call", "send_welcome(to='ada@example.com')", len(payload), False)
    assert preview(payload, task_type="disp:welcome").text == "send_welcome(to='ada@example.com')"
    assert view(payload, task_type="disp:other").kind == "json"  # not registered here
    assert view(payload).kind == "json"
    assert view(b"[1, 2]", task_type="disp:welcome").kind == "json"  # not an object: as it is
    assert view(b"\xff", task_type="disp:welcome").kind == "hex"
    hostile = send_welcome.to_task("x\x1b[2J\n<script>").payload
    assert view(hostile, task_type="disp:welcome").text == "send_welcome(to='x\\x1b[2J\\n<script>')"
    cut = view(send_welcome.to_task("a" * 500).payload, task_type="disp:welcome", limit=40)
    assert cut.truncated and len(cut.text) == 40


def test_inspector_records_show_the_call(redis_url: str, unregistered: None) -> None:
    mod = importlib.import_module(MODULE)
    with Client(redis_url) as client:
        info = mod.send_invoice.enqueue(client, "ACME", date(2026, 4, 1), ["a", "b"])
        other = client.enqueue(Task("insp:plain", b'{"customer":"ACME"}'), queue="billing")
    with Inspector(redis_url) as insp:
        rec = insp.get_task("billing", info.id)
        assert (rec.payload.kind, rec.payload.text) == \
            ("call", "send_invoice(customer='ACME', due='2026-04-01', lines=['a', 'b'])")
        rows = {t.id: t for t in insp.list_tasks("billing", TaskState.PENDING).tasks}
        assert rows[info.id].payload.text == "send_invoice(customer='ACME', due='2026-04-01', lines=['a', 'b'])"
        assert rows[other.id].payload.kind == "json"


def test_cli_imports_tasks_modules(redis_url: str, unregistered: None, capsys: pytest.CaptureFixture[str],
                                   monkeypatch: pytest.MonkeyPatch) -> None:
    with Client(redis_url) as client:
        info = client.enqueue(Task("insp:invoice", b'{"customer":"ACME","due":"2026-04-01","lines":[]}'),
                              queue="billing")
    assert main(["task", "info", "billing", info.id, "--redis-url", redis_url]) == 0
    assert '"customer": "ACME"' in capsys.readouterr().out  # JSON: nothing registered yet
    assert main(["task", "info", "billing", info.id, "--redis-url", redis_url, "--tasks", MODULE]) == 0
    out = capsys.readouterr().out
    assert "payload (call, " in out and "send_invoice(customer='ACME', due='2026-04-01', lines=[])" in out
    assert main(["task", "info", "billing", info.id, "--redis-url", redis_url, "--tasks", "no_such_mod"]) == 2
    assert "cannot import the tasks module 'no_such_mod'" in capsys.readouterr().err

    typed._REGISTRY.pop("insp:invoice", None)
    sys.modules.pop(MODULE, None)
    monkeypatch.setenv("ASYNQPY_TASKS", MODULE)
    monkeypatch.setattr(typed, "_env_loaded", False)
    assert main(["task", "ls", "billing", "--redis-url", redis_url, "--json"]) == 0
    (row,) = json.loads(capsys.readouterr().out)["tasks"]
    assert row["payload"]["kind"] == "call" and row["payload"]["text"].startswith("send_invoice(")


def test_cron_ls_shows_a_typed_entry_as_its_call(redis_url: str, unregistered: None,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    mod = importlib.import_module(MODULE)
    s = Scheduler(redis_url)
    t = mod.send_invoice
    s.register("@every 1h", t.to_task("ACME", date(2026, 4, 1), []), t.defaults)
    thread = threading.Thread(target=lambda: asyncio.run(s.arun()))
    thread.start()
    try:
        with Inspector(redis_url) as insp:
            deadline = time.monotonic() + 10
            while not insp.scheduler_entries() and time.monotonic() < deadline:
                time.sleep(0.05)
        assert main(["cron", "ls", "--redis-url", redis_url]) == 0
    finally:
        s.stop()
        thread.join(10)
    row = capsys.readouterr().out.splitlines()[1]
    assert "insp:invoice" in row and "send_invoice(customer='ACME', due='2026-" in row
