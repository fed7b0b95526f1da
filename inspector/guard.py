"""An Inspector whose Redis connection failures come out as asynqpy's RedisUnavailableError.

Layers above the Inspector (the dashboard) never import redis-py; they catch RedisUnavailableError. When the
Inspector itself raises it, this wrapper passes everything through unchanged.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import redis

from asynqpy.errors import RedisUnavailableError
from inspector.api import Inspector


def _mask(url: str) -> str:
    scheme, sep, rest = url.partition("://")
    if sep and "@" in rest:
        return f"{scheme}://***@{rest.rpartition('@')[2]}"
    return url


class GuardedInspector(Inspector):
    """Inspector whose public methods raise RedisUnavailableError (with .url, password masked) for
    redis.ConnectionError and redis.TimeoutError."""

    def __init__(self, redis_url: str, **kw: Any) -> None:
        super().__init__(redis_url, **kw)
        self.url = _mask(redis_url)

    def __getattribute__(self, name: str) -> Any:
        attr = super().__getattribute__(name)
        if name.startswith("_") or not callable(attr) or name in ("close",):
            return attr
        return _guard(attr, super().__getattribute__("url"))


def _guard(fn: Callable[..., Any], url: str) -> Callable[..., Any]:
    @functools.wraps(fn)
    def call(*args: Any, **kw: Any) -> Any:
        try:
            return fn(*args, **kw)
        except (redis.ConnectionError, redis.TimeoutError) as exc:
            raise RedisUnavailableError(url, exc) from exc
    return call
