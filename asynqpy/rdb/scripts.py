"""Loads the Lua scripts and runs them with EVALSHA, falling back to EVAL on NOSCRIPT, sync or asyncio."""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any, Generic, TypeVar

import redis
import redis.asyncio as aredis
from redis.exceptions import NoScriptError, ResponseError

from asynqpy.rdb.keys import QUEUES

KeyOrArg = str | bytes | int | float
T = TypeVar("T")
R = TypeVar("R", covariant=True)


@dataclass(frozen=True)
class Script:
    """One Lua file from rdb/lua, with its SHA1 for EVALSHA."""

    name: str
    text: str
    sha: str


@cache
def script(name: str) -> Script:
    """The script rdb/lua/<name>.lua, with "-- #include <file>" lines replaced by that fragment's text.

    Raises FileNotFoundError for an unknown name.
    """
    return load_script("asynqpy.rdb", name)


def load_script(package: str, name: str) -> Script:
    """<package>/lua/<name>.lua with its "-- #include <file>" lines replaced by those fragments.

    A fragment is looked up in the same folder first, then in asynqpy/rdb/lua, so another package's scripts
    share the core's fragments (one definition of each step of a transition).
    """
    folder = resources.files(package).joinpath("lua")
    core = resources.files("asynqpy.rdb").joinpath("lua")
    lines = []
    for line in folder.joinpath(f"{name}.lua").read_text().splitlines(keepends=True):
        if line.startswith("-- #include "):
            frag = line.split()[-1]
            own = folder.joinpath(frag)
            line = (own if own.is_file() else core.joinpath(frag)).read_text()
        lines.append(line)
    text = "".join(lines)
    return Script(name, text, hashlib.sha1(text.encode()).hexdigest())


@dataclass(frozen=True)
class Call(Generic[R]):
    """One script invocation: the script, its KEYS and ARGV, and parse, which turns its raw reply (as redis-py
    returns it) into a T or raises the typed error the reply code stands for."""

    script: Script
    keys: Sequence[KeyOrArg]
    args: Sequence[KeyOrArg]
    parse: Callable[[Any], R]


class SyncRunner:
    """Runs Calls on a redis.Redis client (decode_responses must be off: messages are binary)."""

    def __init__(self, client: redis.Redis) -> None:
        self.redis = client

    def run(self, call: Call[T], *, register_queue: str | None = None) -> T:
        """Run one Call and return its parsed reply; the parser raises the typed errors.

        register_queue: also SADD it to asynq:queues, in the same round trip (a producer's duty).
        """
        if register_queue is not None:
            return self._run_registering(call, register_queue)
        n = len(call.keys)
        try:
            raw = self.redis.evalsha(call.script.sha, n, *call.keys, *call.args)
        except NoScriptError:
            raw = self.redis.eval(call.script.text, n, *call.keys, *call.args)
        return call.parse(raw)

    def _run_registering(self, call: Call[T], queue: str) -> T:
        pipe = self.redis.pipeline(transaction=False)
        pipe.sadd(QUEUES, queue)
        pipe.evalsha(call.script.sha, len(call.keys), *call.keys, *call.args)
        _, raw = pipe.execute(raise_on_error=False)
        if isinstance(raw, NoScriptError):
            raw = self.redis.eval(call.script.text, len(call.keys), *call.keys, *call.args)
        elif isinstance(raw, Exception):
            raise raw
        return call.parse(raw)

    def run_many(self, calls: Sequence[Call[T]]) -> list[T | Exception]:
        """Run Calls in one pipeline (not a transaction); each result is the parsed reply or the exception."""
        raws = self._pipeline(calls)
        missing = [i for i, r in enumerate(raws) if isinstance(r, NoScriptError)]
        if missing:
            for s in {calls[i].script for i in missing}:
                self.redis.script_load(s.text)
            again = self._pipeline([calls[i] for i in missing])
            for i, r in zip(missing, again, strict=True):
                raws[i] = r
        return _parse_all(calls, raws)

    def _pipeline(self, calls: Sequence[Call[Any]]) -> list[Any]:
        pipe = self.redis.pipeline(transaction=False)
        for c in calls:
            pipe.evalsha(c.script.sha, len(c.keys), *c.keys, *c.args)
        return list(pipe.execute(raise_on_error=False))


class AsyncRunner:
    """Runs Calls on a redis.asyncio.Redis client."""

    def __init__(self, client: aredis.Redis) -> None:
        self.redis = client

    async def run(self, call: Call[T], *, register_queue: str | None = None) -> T:
        if register_queue is not None:
            return await self._run_registering(call, register_queue)
        n = len(call.keys)
        try:
            raw = await self.redis.evalsha(call.script.sha, n, *call.keys, *call.args)
        except NoScriptError:
            raw = await self.redis.eval(call.script.text, n, *call.keys, *call.args)
        return call.parse(raw)

    async def _run_registering(self, call: Call[T], queue: str) -> T:
        pipe = self.redis.pipeline(transaction=False)
        pipe.sadd(QUEUES, queue)
        pipe.evalsha(call.script.sha, len(call.keys), *call.keys, *call.args)
        _, raw = await pipe.execute(raise_on_error=False)
        if isinstance(raw, NoScriptError):
            raw = await self.redis.eval(call.script.text, len(call.keys), *call.keys, *call.args)
        elif isinstance(raw, Exception):
            raise raw
        return call.parse(raw)

    async def run_many(self, calls: Sequence[Call[T]]) -> list[T | Exception]:
        raws = await self._pipeline(calls)
        missing = [i for i, r in enumerate(raws) if isinstance(r, NoScriptError)]
        if missing:
            for s in {calls[i].script for i in missing}:
                await self.redis.script_load(s.text)
            again = await self._pipeline([calls[i] for i in missing])
            for i, r in zip(missing, again, strict=True):
                raws[i] = r
        return _parse_all(calls, raws)

    async def _pipeline(self, calls: Sequence[Call[Any]]) -> list[Any]:
        pipe = self.redis.pipeline(transaction=False)
        for c in calls:
            pipe.evalsha(c.script.sha, len(c.keys), *c.keys, *c.args)
        return list(await pipe.execute(raise_on_error=False))


def _parse_all(calls: Sequence[Call[T]], raws: Sequence[Any]) -> list[T | Exception]:
    out: list[T | Exception] = []
    for c, r in zip(calls, raws, strict=True):
        out.append(_parse_or_error(c, r))
    return out


def _parse_or_error(call: Call[T], raw: Any) -> T | Exception:
    if isinstance(raw, ResponseError):
        return raw
    try:
        return call.parse(raw)
    except Exception as exc:  # returned, not raised: the caller sees each call's own outcome
        return exc
