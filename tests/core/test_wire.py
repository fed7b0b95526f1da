"""Wire format: Go-written messages decode, unknown fields survive a re-encode, keys are asynq's."""

from __future__ import annotations

import hashlib
import json

import pytest

from asynqpy.rdb import keys
from asynqpy.wire import GO_ZERO_TIME_SECONDS, SchedulerEntry, ServerInfo, TaskMessage, WorkerInfo, timestamp
from asynqpy.wire.codec import timestamp_to_datetime
from tests.inspector.vectors import vectors_dir

VECTORS = vectors_dir()


def load(version: str) -> dict:  # type: ignore[type-arg]
    return json.loads((VECTORS / f"asynq-{version}-state.json").read_text())["keys"]


@pytest.mark.parametrize("version", ["v0.26.0", "v0.25.1"])
def test_go_task_messages_decode(version: str) -> None:
    state = load(version)
    seen = 0
    for key, entry in state.items():
        if ":t:" not in key:
            continue
        m = TaskMessage()
        m.ParseFromString(bytes.fromhex(entry["value"]["msg"]["hex"]))
        q = key.split("{")[1].split("}")[0]
        assert m.queue == q and key == keys.task(q, m.id)
        assert entry["value"]["state"] in {"pending", "active", "scheduled", "retry", "archived", "completed",
                                           "aggregating"}
        seen += 1
        if m.id == "t-opts":
            assert (m.retry, m.timeout, m.retention) == (3, 45, 600)
            assert dict(m.headers) == {"k1": "v1", "k2": "v2"}
        if m.id == "t-uniq":
            assert m.unique_key == keys.unique("vq", m.type, m.payload)
            assert m.unique_key in state
    assert seen >= 10


def test_go_server_worker_and_scheduler_messages_decode() -> None:
    state = load("v0.26.0")
    [skey] = [k for k in state if k.startswith("asynq:servers:")]
    info = ServerInfo.FromString(bytes.fromhex(state[skey]["value"]["hex"]))
    assert skey == keys.server_info(info.host, info.pid, info.server_id)
    assert info.status == "active" and dict(info.queues) == {"lq": 3, "wq": 1}
    [wkey] = [k for k in state if k.startswith("asynq:workers:")]
    w = WorkerInfo.FromString(bytes.fromhex(state[wkey]["value"]["t-active"]["hex"]))
    assert (w.task_id, w.queue) == ("t-active", "lq") and w.deadline.seconds > w.start_time.seconds
    [ekey] = [k for k in state if k.startswith("asynq:schedulers:")]
    e = SchedulerEntry.FromString(bytes.fromhex(state[ekey]["value"][0]["hex"]))
    assert e.spec == "@every 2s" and keys.scheduler_history(e.id) in state


def test_unknown_fields_survive_reencode() -> None:
    newer = TaskMessage(type="t", id="x", queue="q", retry=3).SerializeToString()
    newer += bytes([0x9A, 0x01, 0x03]) + b"abc"  # field 19, wire type 2: something a future Go writes
    m = TaskMessage()
    m.ParseFromString(newer)
    m.retried += 1
    m.error_msg = "boom"
    out = m.SerializeToString()
    assert b"\x9a\x01\x03abc" in out


def test_headers_are_field_15() -> None:
    m = TaskMessage(type="t")
    m.headers["k"] = "v"
    assert m.SerializeToString() == b"\n\x01t" + bytes([0x7A, 0x06, 0x0A, 0x01]) + b"k" + bytes([0x12, 0x01]) + b"v"


def test_go_zero_time_round_trip() -> None:
    ts = timestamp(None)
    assert ts.seconds == GO_ZERO_TIME_SECONDS and timestamp_to_datetime(ts) is None
    t = timestamp(1795994754.25)
    assert (t.seconds, t.nanos) == (1795994754, 250_000_000)


def test_key_layout() -> None:
    assert keys.pending("q") == "asynq:{q}:pending"
    assert keys.task("q", "id") == "asynq:{q}:t:id"
    assert keys.processed_daily("q", 0) == "asynq:{q}:processed:1970-01-01"
    assert keys.unique("q", "t", None) == "asynq:{q}:unique:t:"
    assert keys.unique("q", "t", b"") == "asynq:{q}:unique:t:" + hashlib.md5(b"").hexdigest()
    assert keys.server_info("h", 1, "s") == "asynq:servers:{h:1:s}"
    assert keys.group("q", "g") == "asynq:{q}:g:g"
