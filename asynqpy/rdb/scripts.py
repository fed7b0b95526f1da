"""Loads the Lua scripts and runs them with EVALSHA, falling back to EVAL on NOSCRIPT, sync or asyncio.

On a plain redis.Redis (not a cluster client) the runners send pre-packed commands (pack()) on a pooled
connection and read the replies themselves: the producer's hot path, without redis-py's per-command work.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import threading
import weakref
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from functools import cache, lru_cache
from importlib import resources
from typing import Any, Generic, TypeVar

import hiredis
import redis
import redis.asyncio as aredis
from redis.asyncio.cluster import PipelineCommand
from redis.exceptions import ConnectionError as RedisConnectionError
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


def _arg(x: KeyOrArg) -> bytes:
    """One argument as redis-py's encoder writes it (str UTF-8, int decimal, float repr)."""
    if isinstance(x, bytes):
        return x
    if isinstance(x, str):
        return x.encode()
    if isinstance(x, int) and not isinstance(x, bool):
        return b"%d" % x
    if isinstance(x, float):
        return repr(x).encode()
    raise TypeError(f"a script argument must be str, bytes, int or float, not {type(x).__name__}")


def pack_command(*parts: KeyOrArg) -> bytes:
    """One command in RESP, ready to send."""
    bs = [_arg(p) for p in parts]
    return b"*%d\r\n" % len(bs) + b"".join([b"$%d\r\n%s\r\n" % (len(b), b) for b in bs])


@cache
def _head(sha: str, argc: int, nkeys: int) -> bytes:
    return b"*%d\r\n$7\r\nEVALSHA\r\n$40\r\n%s\r\n$%d\r\n%d\r\n" % (argc + 3, sha.encode(), len(str(nkeys)), nkeys)


@lru_cache(maxsize=1024)
def _str_seg(s: str) -> bytes:
    """One str argument in RESP. Cached: queue keys, prefixes and names recur in every command of a queue (the
    ids and times that do not just pass through the cache)."""
    b = s.encode()
    return b"$%d\r\n%s\r\n" % (len(b), b)


@lru_cache(maxsize=1024)
def _int_seg(n: int) -> bytes:
    """One int argument in RESP. Cached: counts, shares and expiry seconds recur from call to call."""
    b = b"%d" % n
    return b"$%d\r\n%s\r\n" % (len(b), b)


def pack(call: Call[Any]) -> bytes:
    """The EVALSHA of call in RESP, byte for byte what redis-py would send. The keys' segments (and ints: counts,
    shares, expiry seconds) come from caches; the other arguments are mostly ids and times that would only pass
    through one."""
    keys, args = call.keys, call.args
    parts = [_head(call.script.sha, len(keys) + len(args), len(keys))]
    for x in keys:
        if x.__class__ is str:
            parts.append(_str_seg(x))
        else:
            b = _arg(x)
            parts.append(b"$%d\r\n%s\r\n" % (len(b), b))
    for x in args:
        cls = x.__class__
        if cls is int:
            parts.append(_int_seg(x))
            continue
        b = x.encode() if cls is str else x if cls is bytes else _arg(x)  # type: ignore[union-attr, assignment]
        n = len(b)
        parts += (_LENGTHS[n] if n < 512 else b"$%d\r\n" % n, b, b"\r\n")
    return b"".join(parts)


_LENGTHS = [b"$%d\r\n" % n for n in range(512)]  # the head of a bulk string of n bytes


def as_eval(packed: bytes, sc: Script) -> bytes:
    """A packed EVALSHA of sc turned into the EVAL of its text, with the same keys and arguments: the retry after
    NOSCRIPT. EVAL cannot answer NOSCRIPT (a SCRIPT FLUSH between a SCRIPT LOAD and the EVALSHA retry could), and
    it caches the script for the next EVALSHA as SCRIPT LOAD would."""
    sha = b"$7\r\nEVALSHA\r\n$40\r\n" + sc.sha.encode() + b"\r\n"
    text = sc.text.encode()
    return packed.replace(sha, b"$4\r\nEVAL\r\n$%d\r\n%s\r\n" % (len(text), text), 1)


def _eval(call: Call[Any]) -> tuple[Any, ...]:
    return ("EVAL", call.script.text, len(call.keys), *call.keys, *call.args)


def queue_eval(pipe: Any, call: Call[Any]) -> Any:
    """Queue the EVAL of call's script text on a pipeline (the retry after NOSCRIPT)."""
    return pipe.execute_command(*_eval(call))


@dataclass(frozen=True)
class Call(Generic[R]):
    """One script invocation: the script, its KEYS and ARGV, and parse, which turns its raw reply (as redis-py
    returns it) into a T or raises the typed error the reply code stands for."""

    script: Script
    keys: Sequence[KeyOrArg]
    args: Sequence[KeyOrArg]
    parse: Callable[[Any], R]


def _plain_pool(client: Any) -> Any:
    """The connection pool of a plain (sync or asyncio) Redis client, else None (cluster and Sentinel clients
    keep redis-py's own command path)."""
    if isinstance(client, (redis.Redis, aredis.Redis)) and not is_cluster(client):
        pool = getattr(client, "connection_pool", None)
        # Sentinel pools find the primary anew on failover through redis-py's retries: they keep its path.
        if type(pool) in _PLAIN_POOLS:
            return pool
    return None


_PLAIN_POOLS = (redis.ConnectionPool, redis.BlockingConnectionPool, aredis.ConnectionPool,
                aredis.BlockingConnectionPool)


def _evalsha(call: Call[Any]) -> tuple[Any, ...]:
    return ("EVALSHA", call.script.sha, len(call.keys), *call.keys, *call.args)


class SyncRunner:
    """Runs Calls on a redis.Redis client (decode_responses must be off: messages are binary)."""

    def __init__(self, client: redis.Redis) -> None:
        self.redis = client
        self._pool = _plain_pool(client)
        self.plain = self._pool is not None  # send() and send_scripts() work
        self._lock = threading.Lock()
        self._conn: Any = None
        self._conn_pid = 0

    def send(self, packed: Sequence[bytes]) -> list[Any]:
        """Send pre-packed commands in one round trip; the raw replies, an error reply as its exception.

        The runner keeps one pooled connection for itself (a thread that finds it busy takes another from the
        pool), so the hot path skips the pool's checks. A broken connection (e.g. closed by the server while
        idle) is retried once, as redis-py does. Needs a plain client (self.plain).
        """
        data = b"".join(packed) if len(packed) > 1 else packed[0]
        own = self._lock.acquire(blocking=False)
        try:
            for attempt in (1, 2):
                conn = self._own() if own else self._pool.get_connection()
                try:
                    conn.send_packed_command([data])
                    out: list[Any] = []
                    for _ in packed:
                        try:
                            out.append(conn.read_response())
                        except ResponseError as exc:
                            out.append(exc)
                    return out
                except RedisConnectionError:
                    conn.disconnect()
                    if attempt == 2:
                        raise
                except BaseException:
                    conn.disconnect()
                    raise
                finally:
                    if not own:
                        self._pool.release(conn)
            raise AssertionError("unreachable")
        finally:
            if own:
                self._lock.release()

    @contextmanager
    def connection(self) -> Iterator[Any]:
        """The runner's own connection, or one from the pool while another thread uses that (see send())."""
        own = self._lock.acquire(blocking=False)
        try:
            conn = self._own() if own else self._pool.get_connection()
            try:
                yield conn
            finally:
                if not own:
                    self._pool.release(conn)
        finally:
            if own:
                self._lock.release()

    def _own(self) -> Any:
        """The runner's own connection (a new one in a forked child); it reconnects by itself when dropped."""
        if self._conn is None or self._conn_pid != os.getpid():
            self._conn = self._pool.get_connection()  # in use for good: the pool closes it with the client
            self._conn_pid = os.getpid()
        return self._conn

    def send_scripts(self, packed: Sequence[bytes], scripts: Sequence[Script | None]) -> list[Any]:
        """send(), then load the scripts Redis did not have (NOSCRIPT) and send those commands again.
        scripts: each command's script (None for a command that is no script call)."""
        raws = self.send(packed)
        missing = [i for i, r in enumerate(raws) if isinstance(r, NoScriptError) and scripts[i] is not None]
        if missing:
            again = self.send([as_eval(packed[i], scripts[i]) for i in missing])  # type: ignore[arg-type]
            for i, r in zip(missing, again, strict=True):
                raws[i] = r
        return raws

    def run(self, call: Call[T], *, register_queue: str | None = None) -> T:
        """Run one Call and return its parsed reply; the parser raises the typed errors.

        register_queue: also SADD it to asynq:queues, in the same round trip (a producer's duty).
        """
        if self._pool is not None:
            return call.parse(self.run_packed(pack(call), call.script, register_queue=register_queue))
        if register_queue is not None:
            return self._run_registering(call, register_queue)
        n = len(call.keys)
        try:
            raw = self.redis.evalsha(call.script.sha, n, *call.keys, *call.args)
        except NoScriptError:
            raw = self.redis.eval(call.script.text, n, *call.keys, *call.args)
        return call.parse(raw)

    def run_packed(self, cmd: bytes, sc: Script, *, register_queue: str | None = None) -> Any:
        """run() of a call packed already (an EVALSHA of sc): its raw reply, an error reply raised. Needs a plain
        client (self.plain)."""
        sent = [cmd] if register_queue is None else [pack_command("SADD", QUEUES, register_queue), cmd]
        raw = self.send(sent)[-1]
        if isinstance(raw, NoScriptError):
            raw = self.send([as_eval(cmd, sc)])[0]
        if isinstance(raw, Exception):
            raise raw
        return raw

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
                for c in group:  # the retry after NOSCRIPT sends the scripts' text
                    pipe.execute_command(*(_evalsha(c) if attempt == 0 else _eval(c)))
                pipe.execute_command(*durable.wait_command)
                res = list(pipe.execute(raise_on_error=False))
                if attempt == 0 and any(isinstance(r, NoScriptError) for r in res):
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
            again = self._pipeline([calls[i] for i in missing], text=True)
            for i, r in zip(missing, again, strict=True):
                raws[i] = r
        return _parse_all(calls, raws)

    def _pipeline(self, calls: Sequence[Call[Any]], *, text: bool = False) -> list[Any]:
        """The calls in one round trip: EVALSHA, or (text) EVAL of the scripts' text, the retry after NOSCRIPT."""
        if self._pool is not None:
            return self.send([as_eval(pack(c), c.script) if text else pack(c) for c in calls])
        pipe = self.redis.pipeline(transaction=False)
        for c in calls:
            (queue_eval if text else queue_call)(pipe, c)
        return list(pipe.execute(raise_on_error=False))


IDLE_CONNECTIONS = 8  # idle connections kept for AsyncRunner.send() per pool (more in use at once go back to it)
_IDLE: weakref.WeakKeyDictionary[Any, list[Any]] = weakref.WeakKeyDictionary()


async def _write(conn: Any, data: bytes) -> None:
    """Write data on a redis-py asyncio connection, as its send_packed_command does, without the task and timer
    of its write timeout while the socket takes the bytes at once (the common case): only when some stay
    buffered (or the transport is closing) does the write wait for them, within the socket timeout. A connection
    that is closed, or due for its health check (PING), takes redis-py's own path."""
    writer = conn._writer
    if (writer is None or (conn.health_check_interval and asyncio.get_running_loop().time() > conn.next_health_check)):
        await conn.send_packed_command([data])
        return
    try:
        writer.write(data)
        transport = writer.transport
        if transport.get_write_buffer_size() or transport.is_closing():
            await asyncio.wait_for(writer.drain(), conn.socket_timeout)
    except TimeoutError:
        await conn.disconnect(nowait=True)
        raise redis.TimeoutError("Timeout writing to socket") from None
    except OSError as exc:
        await conn.disconnect(nowait=True)
        raise RedisConnectionError(f"Error while writing to socket: {exc}") from exc


async def _read_replies(stream: asyncio.StreamReader, n: int) -> list[Any]:
    """n replies read straight off the connection's stream with a hiredis Reader: a round trip of many replies
    costs one await per chunk, not several per reply. An error reply is its exception (NoScriptError for
    NOSCRIPT); a closed stream raises redis-py's ConnectionError."""
    reader = hiredis.Reader(replyError=ResponseError)
    out: list[Any] = []
    while len(out) < n:
        reply = reader.gets()
        if reply is False:
            chunk = await stream.read(65536)
            if not chunk:
                raise RedisConnectionError("Connection closed by server.")
            reader.feed(chunk)
            continue
        if isinstance(reply, ResponseError) and str(reply).startswith("NOSCRIPT"):
            reply = NoScriptError(str(reply))
        out.append(reply)
    return out


class AsyncRunner:
    """Runs Calls on a redis.asyncio.Redis client."""

    def __init__(self, client: aredis.Redis) -> None:
        self.redis = client
        self._pool = _plain_pool(client)
        self.plain = self._pool is not None  # send() and send_scripts() work
        # connections of send() taken from the pool and kept (see send()), shared by the runners of one pool
        self._idle: list[Any] = _IDLE.setdefault(self._pool, []) if self._pool is not None else []

    @property
    def pool(self) -> Any:
        """The plain client's connection pool (only when self.plain)."""
        return self._pool

    async def send(self, packed: Sequence[bytes]) -> list[Any]:
        """See SyncRunner.send. The connections it takes from the pool are kept (at most IDLE_CONNECTIONS idle ones
        per pool, shared by the runners on it), so a round trip skips the pool's lock and bookkeeping; the client's
        close() closes them with the pool's own (they count as in use). A call that fails midway disconnects its
        connection (no reply is left unread on one)."""
        data = b"".join(packed) if len(packed) > 1 else packed[0]
        idle = self._idle
        for attempt in (1, 2):
            conn = idle.pop() if idle else await self._pool.get_connection()
            try:
                await _write(conn, data)
                stream = getattr(conn, "_reader", None)  # redis-py's asyncio.StreamReader of the connection
                if isinstance(stream, asyncio.StreamReader):
                    return await _read_replies(stream, len(packed))
                out: list[Any] = []
                for _ in packed:
                    try:
                        out.append(await conn.read_response())
                    except ResponseError as exc:
                        out.append(exc)
                return out
            except RedisConnectionError:
                await conn.disconnect()
                if attempt == 2:
                    raise
            except BaseException:
                await conn.disconnect()
                raise
            finally:
                if len(idle) < IDLE_CONNECTIONS and not conn.should_reconnect():
                    idle.append(conn)
                else:
                    await self._pool.release(conn)
        raise AssertionError("unreachable")

    async def send_scripts(self, packed: Sequence[bytes], scripts: Sequence[Script | None]) -> list[Any]:
        """See SyncRunner.send_scripts."""
        raws = await self.send(packed)
        missing = [i for i, r in enumerate(raws) if isinstance(r, NoScriptError) and scripts[i] is not None]
        if missing:
            again = await self.send([as_eval(packed[i], scripts[i]) for i in missing])  # type: ignore[arg-type]
            for i, r in zip(missing, again, strict=True):
                raws[i] = r
        return raws

    async def run(self, call: Call[T], *, register_queue: str | None = None) -> T:
        if self._pool is not None:
            cmd = pack(call)
            sent = [cmd] if register_queue is None else [pack_command("SADD", QUEUES, register_queue), cmd]
            raw = (await self.send(sent))[-1]
            if isinstance(raw, NoScriptError):
                raw = (await self.send([as_eval(cmd, call.script)]))[0]
            if isinstance(raw, Exception):
                raise raw
            return call.parse(raw)
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
                    cmds = [PipelineCommand(i, *(_evalsha(c) if attempt == 0 else _eval(c)))
                            for i, c in enumerate(group)]
                    cmds.append(PipelineCommand(len(group), *durable.wait_command))
                    await node.execute_pipeline(cmds)
                    res = [c.result for c in cmds]
                else:
                    pipe = rc.pipeline(transaction=False)
                    for c in group:  # the retry after NOSCRIPT sends the scripts' text
                        pipe.execute_command(*(_evalsha(c) if attempt == 0 else _eval(c)))
                    pipe.execute_command(*durable.wait_command)
                    res = list(await pipe.execute(raise_on_error=False))
                if attempt == 0 and any(isinstance(r, NoScriptError) for r in res):
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
            again = await self._pipeline([calls[i] for i in missing], text=True)
            for i, r in zip(missing, again, strict=True):
                raws[i] = r
        return _parse_all(calls, raws)

    async def _pipeline(self, calls: Sequence[Call[Any]], *, text: bool = False) -> list[Any]:
        """See SyncRunner._pipeline."""
        if self._pool is not None:
            return await self.send([as_eval(pack(c), c.script) if text else pack(c) for c in calls])
        pipe = self.redis.pipeline(transaction=False)
        for c in calls:
            (queue_eval if text else queue_call)(pipe, c)
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
