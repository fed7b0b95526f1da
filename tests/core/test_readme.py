"""The README's quick start runs as written (against the test server)."""

from __future__ import annotations

import re
import sys
import types
from pathlib import Path

import redis

from asynqpy.rdb import keys
from tests.helpers import running, wait_for

README = Path(__file__).resolve().parents[2] / "README.md"


def blocks() -> list[str]:
    return re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.S)


def test_quick_start_producer_and_handler(redis_url: str, r: redis.Redis, capsys) -> None:  # type: ignore[no-untyped-def]
    producer, handler = blocks()[:2]
    exec(producer.replace("redis://localhost:6379/0", redis_url), {})
    assert r.llen(keys.pending("critical")) == 1 and r.zcard(keys.scheduled("default")) == 1
    mod = types.ModuleType("readme_tasks")
    exec(handler, mod.__dict__)
    sys.modules["readme_tasks"] = mod
    with running(redis_url, mod.mux, queues={"critical": 6, "default": 3}):
        wait_for(lambda: r.get(keys.processed_total("critical")) == b"1" and r.zcard(keys.retry("default")) == 1)
    # the welcome email was sent; report:daily has no handler in this module, so it waits to be retried
    assert r.get(keys.failed_total("critical")) is None
