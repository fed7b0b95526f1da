"""Loads the golden Redis state written by Go asynq (shared/vectors) into a test Redis.

The directory comes from ASYNQPY_VECTORS, else ../shared/vectors beside the repository, else
/work/shared/vectors. Keys are loaded without TTLs; scores and values exactly as Go wrote them.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import redis

REPO = Path(__file__).resolve().parents[2]
VERSIONS = ("v0.26.0", "v0.25.1")


def vectors_dir() -> Path | None:
    """The first existing vectors directory, or None."""
    env = os.environ.get("ASYNQPY_VECTORS")
    candidates = [Path(env)] if env else []
    candidates += [REPO.parent / "shared" / "vectors", Path("/work/shared/vectors")]
    for c in candidates:
        if (c / "README.md").exists() or any(c.glob("asynq-*-state.json")):
            return c
    return None


def value(v: Any) -> bytes:
    """A dumped value: {"hex": ...} is binary, a plain string is UTF-8 text."""
    if isinstance(v, dict):
        return bytes.fromhex(v["hex"])
    return str(v).encode()


def load_state(r: redis.Redis, path: Path) -> None:
    """Write every dumped key into r (no TTLs), in the dumped order."""
    dump = json.loads(path.read_text())
    pipe = r.pipeline(transaction=False)
    for key, item in dump["keys"].items():
        kind, v = item["type"], item["value"]
        if kind == "string":
            pipe.set(key, value(v))
        elif kind == "list":
            pipe.rpush(key, *[value(x) for x in v])
        elif kind == "set":
            pipe.sadd(key, *[value(x) for x in v])
        elif kind == "zset":
            pipe.zadd(key, {value(m): float(s) for m, s in v})
        elif kind == "hash":
            pipe.hset(key, mapping={f: value(x) for f, x in v.items()})
        else:
            raise ValueError(f"unknown key type {kind!r} for {key}")
    pipe.execute()


def inspect_report(path: Path) -> dict[str, Any]:
    """What the Go Inspector reported for the same state."""
    return dict(json.loads(path.read_text()))
