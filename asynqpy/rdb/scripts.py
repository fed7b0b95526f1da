"""Loads the Lua scripts and runs them with EVALSHA, falling back to EVAL on NOSCRIPT, sync or asyncio."""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import cache
from importlib import resources
from typing import Any

import redis
import redis.asyncio as aredis
from redis.exceptions import NoScriptError, ResponseError

from asynqpy.rdb.keys import QUEUES

KeyOrArg = str | bytes | int | float


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
    """<package>/lua/<name>.lua with its "-- #include <file>" lines replaced by those fragments (same folder)."""
    folder = resources.files(package).joinpath("lua")
    lines = []
    for line in folder.joinpath(f"{name}.lua").read_text().splitlines(keepends=True):
        lines.append(folder.joinpath(line.split()[-1]).read_text() if line.startswith("-- #include ") else line)
    text = "".join(lines)
    return Script(name, text, hashlib.sha1(text.encode()).hexdigest())


def _identity(raw: Any) -> Any:
    return raw


@dataclass(frozen=True)
class Call:
    """One script invocation: the script, its KEYS and ARGV, and how to read its reply."""

    script: Script
    keys: Sequence[KeyOrArg]
    args: Sequence[KeyOrArg]
    parse: Callable[[Any], Any] = field(default=_identity)


class SyncRunner:
    """Runs Calls on a redis.Redis client (decode_responses must be off: messages are binary)."""

    def __init__(self, client: redis.Redis) -> None:
        self.redis = client

    def run(self, call: Call, *, register_queue: str | None = None) -> Any:
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

    def _run_registering(self, call: Call, queue: str) -> Any:
        pipe = self.redis.pipeline(transaction=False)
        pipe.sadd(QUEUES, queue)
        queue_call(pipe, call)
        _, raw = pipe.execute(raise_on_error=False)
        if isinstance(raw, NoScriptError):
            raw = self.redis.eval(call.script.text, len(call.keys), *call.keys, *call.args)
        elif isinstance(raw, Exception):
            raise raw
        return call.parse(raw)

    def run_many(self, calls: Sequence[Call]) -> list[Any]:
        """Run Calls in one pipeline (not a transaction); each result is the parsed reply or the exception."""
        raws = self._pipeline(calls)
        missing = [i for i, r in enumerate(raws) if isinstance(r, NoScriptError)]
        if missing:
            for s in {calls[i].script for i in missing}:
                self.redis.script_load(s.text)
            again = self._pipeline([calls[i] for i in missing])
            for i, r in zip(missing, again, strict=True):
                raws[i] = r
        return [_parse_or_error(c, r) for c, r in zip(calls, raws, strict=True)]

    def _pipeline(self, calls: Sequence[Call]) -> list[Any]:
        pipe = self.redis.pipeline(transaction=False)
        for c in calls:
            queue_call(pipe, c)
        return list(pipe.execute(raise_on_error=False))


class AsyncRunner:
    """Runs Calls on a redis.asyncio.Redis client."""

    def __init__(self, client: aredis.Redis) -> None:
        self.redis = client

    async def run(self, call: Call, *, register_queue: str | None = None) -> Any:
        if register_queue is not None:
            return await self._run_registering(call, register_queue)
        n = len(call.keys)
        try:
            raw = await self.redis.evalsha(call.script.sha, n, *call.keys, *call.args)
        except NoScriptError:
            raw = await self.redis.eval(call.script.text, n, *call.keys, *call.args)
        return call.parse(raw)

    async def _run_registering(self, call: Call, queue: str) -> Any:
        pipe = self.redis.pipeline(transaction=False)
        pipe.sadd(QUEUES, queue)
        queue_call(pipe, call)
        _, raw = await pipe.execute(raise_on_error=False)
        if isinstance(raw, NoScriptError):
            raw = await self.redis.eval(call.script.text, len(call.keys), *call.keys, *call.args)
        elif isinstance(raw, Exception):
            raise raw
        return call.parse(raw)

    async def run_many(self, calls: Sequence[Call]) -> list[Any]:
        raws = await self._pipeline(calls)
        missing = [i for i, r in enumerate(raws) if isinstance(r, NoScriptError)]
        if missing:
            for s in {calls[i].script for i in missing}:
                await self.redis.script_load(s.text)
            again = await self._pipeline([calls[i] for i in missing])
            for i, r in zip(missing, again, strict=True):
                raws[i] = r
        return [_parse_or_error(c, r) for c, r in zip(calls, raws, strict=True)]

    async def _pipeline(self, calls: Sequence[Call]) -> list[Any]:
        pipe = self.redis.pipeline(transaction=False)
        for c in calls:
            queue_call(pipe, c)
        return list(await pipe.execute(raise_on_error=False))


def queue_call(pipe: Any, call: Call) -> Any:
    """Queue EVALSHA for call on a pipeline. Through execute_command: redis-py's cluster pipeline refuses its
    evalsha() method, yet routes the command by its first key (every script's keys share one slot)."""
    return pipe.execute_command("EVALSHA", call.script.sha, len(call.keys), *call.keys, *call.args)


def _parse_or_error(call: Call, raw: Any) -> Any:
    if isinstance(raw, ResponseError):
        return raw
    try:
        return call.parse(raw)
    except Exception as exc:  # returned, not raised: the caller sees each call's own outcome
        return exc
