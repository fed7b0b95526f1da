"""Builds the Inspector benchmark's state in asynq's layout, fast (bench/inspector_bench.py measures on it).

Tasks are written straight into Redis, without a worker: per task the hash asynq:{q}:t:<id> (msg, state,
pending_since) and the state's list or sorted set, by a Lua loader that writes 20,000 tasks per call. Each
message is asynqpy's own TaskMessage (build_message), serialised once with a placeholder ID and cut around
it. See bench/README_inspector.md, "How the data is made".
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import Any

import redis

from asynqpy.options import build_options
from asynqpy.rdb import keys
from asynqpy.rdb.broker import build_message
from asynqpy.wire import decode_task_message

TASK_TYPE = "bench:inspect"
ID_PLACEHOLDER = b"Z" * 36  # every task ID is 36 characters, like asynq's UUIDs
NEEDLE = "needle-7f3a"  # the text search looks for; one task in NEEDLE_EVERY carries it
NEEDLE_EVERY = 1000
PER_QUEUE = {"pending": 100, "scheduled": 50, "retry": 50, "archived": 50, "completed": 50}
STATE_NO = {"pending": 1, "scheduled": 2, "retry": 3, "archived": 4, "completed": 5}
LOAD_CHUNK = 20_000  # tasks per loader script call

# Writes tasks first..first+count-1 of one state in asynq's layout: the task hash (msg, state, and
# pending_since for pending tasks) and the state's list (LPUSH, so task `first` ends up oldest, at the
# right) or sorted set (score = base + index, whole seconds). The message is head .. id .. tail: the
# protobuf bytes asynqpy's build_message made with a 36-byte placeholder ID, cut around the placeholder.
LOADER = """
-- KEYS[1] the state's list or sorted set
-- ARGV[1] task key prefix   ARGV[2] state   ARGV[3] id prefix (24 chars)   ARGV[4] first index   ARGV[5] count
-- ARGV[6] msg head   ARGV[7] msg tail   ARGV[8] pending_since ('' = none)   ARGV[9] score base ('' = list)
-- ARGV[10] every n-th index uses ARGV[11]/ARGV[12] as head/tail instead (0 = never)
local list = ARGV[9] == ""
local first, n, every = tonumber(ARGV[4]), tonumber(ARGV[5]), tonumber(ARGV[10])
local base = tonumber(ARGV[9])
local batch = {}
local function flush()
  if #batch == 0 then return end
  if list then redis.call("LPUSH", KEYS[1], unpack(batch)) else redis.call("ZADD", KEYS[1], unpack(batch)) end
  batch = {}
end
for i = first, first + n - 1 do
  local id = ARGV[3] .. string.format("%012x", i)
  local head, tail = ARGV[6], ARGV[7]
  if every > 0 and i % every == 0 then head, tail = ARGV[11], ARGV[12] end
  if ARGV[8] ~= "" then
    redis.call("HSET", ARGV[1] .. id, "msg", head .. id .. tail, "state", ARGV[2], "pending_since", ARGV[8])
  else
    redis.call("HSET", ARGV[1] .. id, "msg", head .. id .. tail, "state", ARGV[2])
  end
  if list then
    batch[#batch + 1] = id
  else
    batch[#batch + 1] = base + i
    batch[#batch + 1] = id
  end
  if #batch >= 1000 then flush() end
end
flush()
return n
"""


def task_id(queue_no: int, state: str, i: int) -> str:
    """The ID the loader gives task i: a UUIDv4-shaped string, unique per queue and state."""
    return f"{queue_no:08x}-{STATE_NO[state]:04x}-4000-8000-{i:012x}"


def template(queue: str, state: str, payload: bytes, now: float) -> tuple[bytes, bytes]:
    """The TaskMessage bytes asynqpy writes for a task of this state, cut around a placeholder ID."""
    opts = build_options(queue=queue, task_id=ID_PLACEHOLDER.decode())
    msg = build_message(TASK_TYPE, payload, {}, opts)
    if state in ("retry", "archived"):  # what the worker's retry/archive leaves in the message
        msg.retried = 3 if state == "retry" else msg.retry
        msg.error_msg = "bench: handler failed: connection refused"
        msg.last_failed_at = int(now) - 60
    elif state == "completed":
        msg.retention = 86400
        msg.completed_at = int(now) - 60
    data = msg.SerializeToString()
    if data.count(ID_PLACEHOLDER) != 1:
        raise AssertionError("the placeholder ID must occur exactly once in the message")
    head, tail = data.split(ID_PLACEHOLDER)
    return head, tail


def payload(n: int, needle: bool = False) -> bytes:
    note = f"contains {NEEDLE}" if needle else "regular order"
    return json.dumps({"order_id": 100000 + n, "customer": "acme-corp", "sku": "B-1138", "note": note}).encode()


@dataclass
class Loader:
    r: redis.Redis
    now: float
    loaded: int = 0
    seconds: float = 0.0
    _script: Any = field(init=False)

    def __post_init__(self) -> None:
        self._script = self.r.register_script(LOADER)

    def add(self, queue: str, queue_no: int, state: str, count: int, *, needle_every: int = 0) -> None:
        """Write count tasks of one state into queue, asynq's layout, registered in asynq:queues."""
        t0 = time.perf_counter()
        head, tail = template(queue, state, payload(queue_no), self.now)
        alt = template(queue, state, payload(queue_no, needle=True), self.now) if needle_every else (b"", b"")
        since = str(int((self.now - 600) * 1e9)) if state == "pending" else ""
        base = {"pending": "", "scheduled": int(self.now) + 3600, "retry": int(self.now) + 60,
                "archived": int(self.now) - count - 86400, "completed": int(self.now) + 86400}[state]
        self.r.sadd(keys.QUEUES, queue)
        prefix = task_id(queue_no, state, 0)[:24]
        for first in range(0, count, LOAD_CHUNK):
            n = min(LOAD_CHUNK, count - first)
            self._script(keys=[keys.state_key(queue, state)],
                         args=[keys.task_prefix(queue), state, prefix, first, n, head, tail, since, base,
                               needle_every, alt[0], alt[1]])
        self.seconds += time.perf_counter() - t0
        self.loaded += count

    def check(self, queue: str, queue_no: int, state: str, i: int) -> None:
        """Fails unless task i decodes to the right ID and queue with its state set."""
        tid = task_id(queue_no, state, i)
        raw, st = self.r.hmget(keys.task(queue, tid), "msg", "state")
        if not isinstance(raw, bytes):
            raise AssertionError(f"loaded task {tid} in {queue} has no message")
        msg = decode_task_message(raw)
        if (msg.id, msg.queue, msg.type, st) != (tid, queue, TASK_TYPE, state.encode()):
            raise AssertionError(f"loaded task {tid} in {queue} is wrong: {msg} state={st!r}")

