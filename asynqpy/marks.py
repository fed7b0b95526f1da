"""Deploy marks: a labelled instant ("v1.4.2") recorded in Redis, which the dashboard's charts draw."""

from __future__ import annotations

import json
import time

from asynqpy.connection import connect
from asynqpy.embedded import default_redis_url
from asynqpy.errors import InvalidArgumentError
from asynqpy.rdb.failures import reaching
from asynqpy.rdb.state import add_mark
from asynqpy.rdb.sync_runner import SyncRunner

MAX_LABEL = 200


def encode_mark(label: str, at: float, by: str = "") -> str:
    """The stored form of a mark (JSON; the time is part of it, so the same label twice is two marks).

    Raises InvalidArgumentError for a blank or over-long label.
    """
    if not isinstance(label, str) or not label.strip():
        raise InvalidArgumentError("a mark needs a non-blank label, e.g. 'v1.4.2'", argument="label")
    if len(label) > MAX_LABEL:
        raise InvalidArgumentError(f"a mark's label is at most {MAX_LABEL} characters", argument="label")
    return json.dumps({"label": label.strip(), "at": round(at, 3), "by": by}, separators=(",", ":"))


def mark(label: str, *, redis_url: str | None = None, at: float | None = None, by: str = "") -> float:
    """Record a deploy mark now (or at Unix seconds at) and return its time.

    Raises InvalidArgumentError for a bad label, RedisUnavailableError when Redis cannot be reached.
    """
    t = time.time() if at is None else float(at)
    text = encode_mark(label, t, by)
    url = redis_url or default_redis_url()
    conn = connect(url)
    try:
        with reaching(url):
            SyncRunner(conn).run(add_mark(text, at=t))
    finally:
        conn.close()
    return t
