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
from redis.asyncio.cluster import PipelineCommand
from redis.exceptions import NoScriptError, ResponseError

from asynqpy.connection import is_cluster
from asynqpy.errors import NotDurableError
from asynqpy.rdb.durability import Durability
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


def _evalsha(call: Call[Any]) -> tuple[Any, ...]:
    return ("EVALSHA", call.script.sha, len(call.keys), *call.keys, *call.args)


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

    def run_durable(self, call: Call[T], durable: Durability, *, register_queue: str | None = None) -> T:
        """run(), then WAIT on the same connection (the node holding the call's keys on a cluster).

        Raises NotDurableError when too few replicas confirm within the timeout (the write stands on the primary).
        """
        if register_queue is not None:
            self.redis.sadd(QUEUES, register_queue)  # a global key: another slot on a cluster
        [(raw, acked)] = self._durable_groups([call], durable)
        if isinstance(raw[0], Exception):
            raise raw[0]
        result = call.parse(raw[0])  # typed errors (duplicate, conflict) first: then nothing was written
        durable.check(acked, call.script.name)
        return result

    def run_many_durable(self, calls: Sequence[Call[T]], durable: Durability) -> tuple[list[T | Exception], bool]:
        """run_many() followed by WAIT per node. Returns (results, True when every node's replicas confirmed)."""
        return _gather(calls, self._by_node(calls), self._durable_groups(calls, durable), durable)

    def _by_node(self, calls: Sequence[Call[Any]]) -> list[list[int]]:
        groups: dict[str, list[int]] = {}
        for i, c in enumerate(calls):
            node = self.redis.get_node_from_key(c.keys[0]).name if is_cluster(self.redis) else ""  # type: ignore[attr-defined]
            groups.setdefault(node, []).append(i)
        return list(groups.values())

    def _durable_groups(self, calls: Sequence[Call[Any]], durable: Durability) -> list[tuple[list[Any], Any]]:
        """Per node: its calls and WAIT in one pipeline on one connection; NOSCRIPT loads and retries once."""
        out = []
        for idxs in self._by_node(calls):
            group = [calls[i] for i in idxs]
            conn: Any = self.redis
            if is_cluster(self.redis):
                rc: Any = self.redis
                conn = rc.get_redis_connection(rc.get_node_from_key(group[0].keys[0]))
            for attempt in range(2):
                pipe = conn.pipeline(transaction=False)
                for c in group:
                    pipe.execute_command(*_evalsha(c))
                pipe.execute_command(*durable.wait_command)
                res = list(pipe.execute(raise_on_error=False))
                if attempt == 0 and any(isinstance(r, NoScriptError) for r in res):
                    for sc in {c.script for c in group}:
                        self.redis.script_load(sc.text)
                    continue
                break
            for r in res[:-1]:
                if isinstance(r, Exception) and not isinstance(r, ResponseError):
                    raise r
            out.append((res[:-1], res[-1]))
        return out

    def _run_registering(self, call: Call[T], queue: str) -> T:
        pipe = self.redis.pipeline(transaction=False)
        pipe.sadd(QUEUES, queue)
        queue_call(pipe, call)
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
            queue_call(pipe, c)
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

    async def run_durable(self, call: Call[T], durable: Durability, *, register_queue: str | None = None) -> T:
        """See SyncRunner.run_durable."""
        if register_queue is not None:
            await self.redis.sadd(QUEUES, register_queue)
        [(raw, acked)] = await self._durable_groups([call], durable)
        if isinstance(raw[0], Exception):
            raise raw[0]
        result = call.parse(raw[0])  # typed errors (duplicate, conflict) first: then nothing was written
        durable.check(acked, call.script.name)
        return result

    async def run_many_durable(self, calls: Sequence[Call[T]], durable: Durability) -> tuple[list[T | Exception], bool]:
        """See SyncRunner.run_many_durable."""
        return _gather(calls, await self._by_node(calls), await self._durable_groups(calls, durable), durable)

    async def _by_node(self, calls: Sequence[Call[Any]]) -> list[list[int]]:
        groups: dict[str, list[int]] = {}
        rc: Any = self.redis
        if is_cluster(rc):
            await rc.initialize()
        for i, c in enumerate(calls):
            node = rc.get_node_from_key(c.keys[0]).name if is_cluster(rc) else ""
            groups.setdefault(node, []).append(i)
        return list(groups.values())

    async def _durable_groups(self, calls: Sequence[Call[Any]], durable: Durability) -> list[tuple[list[Any], Any]]:
        out = []
        rc: Any = self.redis
        for idxs in await self._by_node(calls):
            group = [calls[i] for i in idxs]
            for attempt in range(2):
                if is_cluster(rc):  # the owning node's own pipeline: one connection for the writes and WAIT
                    node = rc.get_node_from_key(group[0].keys[0])
                    cmds = [PipelineCommand(i, *_evalsha(c)) for i, c in enumerate(group)]
                    cmds.append(PipelineCommand(len(group), *durable.wait_command))
                    await node.execute_pipeline(cmds)
                    res = [c.result for c in cmds]
                else:
                    pipe = rc.pipeline(transaction=False)
                    for c in group:
                        pipe.execute_command(*_evalsha(c))
                    pipe.execute_command(*durable.wait_command)
                    res = list(await pipe.execute(raise_on_error=False))
                if attempt == 0 and any(isinstance(r, NoScriptError) for r in res):
                    for sc in {c.script for c in group}:
                        await rc.script_load(sc.text)
                    continue
                break
            for r in res[:-1]:
                if isinstance(r, Exception) and not isinstance(r, ResponseError):
                    raise r
            out.append((res[:-1], res[-1]))
        return out

    async def _run_registering(self, call: Call[T], queue: str) -> T:
        pipe = self.redis.pipeline(transaction=False)
        pipe.sadd(QUEUES, queue)
        queue_call(pipe, call)
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
            queue_call(pipe, c)
        return list(await pipe.execute(raise_on_error=False))


def _gather(calls: Sequence[Call[T]], order: list[list[int]], groups: list[tuple[list[Any], Any]],
            durable: Durability) -> tuple[list[T | Exception], bool]:
    """Per-call results in call order from per-node replies, and whether every node's WAIT was enough."""
    slots: dict[int, T | Exception] = {}
    confirmed = True
    for idxs, (raws, acked) in zip(order, groups, strict=True):
        for i, raw in zip(idxs, raws, strict=True):
            slots[i] = _parse_or_error(calls[i], raw)
        try:
            durable.check(acked, "batch")
        except NotDurableError:
            confirmed = False
    return [slots[i] for i in range(len(calls))], confirmed


def queue_call(pipe: Any, call: Call[Any]) -> Any:
    """Queue EVALSHA for call on a pipeline. Through execute_command: redis-py's cluster pipeline refuses its
    evalsha() method, yet routes the command by its first key (every script's keys share one slot)."""
    return pipe.execute_command("EVALSHA", call.script.sha, len(call.keys), *call.keys, *call.args)


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
