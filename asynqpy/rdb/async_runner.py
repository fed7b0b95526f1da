"""AsyncRunner: runs Calls on a redis.asyncio.Redis client (on a plain one, straight on its connections)."""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import Sequence
from typing import Any, TypeVar

import hiredis
import redis
import redis.asyncio as aredis
from redis.asyncio.cluster import PipelineCommand
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import NoScriptError, ResponseError

from asynqpy.connection import is_cluster
from asynqpy.rdb.durability import Durability
from asynqpy.rdb.keys import QUEUES
from asynqpy.rdb.plain import plain_pool
from asynqpy.rdb.resp import as_eval, pack, pack_command
from asynqpy.rdb.scripts import (
    Call,
    Script,
    durable_replies,
    eval_args,
    evalsha_args,
    gather_by_node,
    parse_all,
    queue_call,
    queue_eval,
)

T = TypeVar("T")


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


async def _read_in_time(conn: Any, stream: asyncio.StreamReader, n: int) -> list[Any]:
    """_read_replies within the connection's socket timeout, as redis-py's own reads are: a Redis that does not
    answer (stopped, partitioned, a blackholed link) raises redis-py's TimeoutError then, not never. A timer, not
    wait_for(): it costs no task per round trip; when it fires, the stream's pending read raises, and the caller
    disconnects the connection (a late reply must not be read as the next call's)."""
    timeout = conn.socket_timeout
    if not timeout:
        return await _read_replies(stream, n)
    timer = asyncio.get_running_loop().call_later(timeout, _time_out, conn, stream)
    try:
        out = await _read_replies(stream, n)
    finally:
        timer.cancel()
    if stream.exception() is not None:  # it fired as the last reply came: the stream keeps its error, so the
        await conn.disconnect(nowait=True)  # connection goes (the next call connects anew)
    return out


def _time_out(conn: Any, stream: asyncio.StreamReader) -> None:
    where = conn._host_error() if hasattr(conn, "_host_error") else "Redis"
    stream.set_exception(redis.TimeoutError(f"Timeout reading from {where}"))


class AsyncRunner:
    """Runs Calls on a redis.asyncio.Redis client."""

    def __init__(self, client: aredis.Redis) -> None:
        self.redis = client
        self._pool = plain_pool(client)
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
                    return await _read_in_time(conn, stream, len(packed))
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
        return gather_by_node(calls, await self._by_node(calls), await self._durable_groups(calls, durable), durable)

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
                    cmds = [PipelineCommand(i, *(evalsha_args(c) if attempt == 0 else eval_args(c)))
                            for i, c in enumerate(group)]
                    cmds.append(PipelineCommand(len(group), *durable.wait_command))
                    await node.execute_pipeline(cmds)
                    res = [c.result for c in cmds]
                else:
                    pipe = rc.pipeline(transaction=False)
                    for c in group:  # the retry after NOSCRIPT sends the scripts' text
                        pipe.execute_command(*(evalsha_args(c) if attempt == 0 else eval_args(c)))
                    pipe.execute_command(*durable.wait_command)
                    res = list(await pipe.execute(raise_on_error=False))
                if attempt == 0 and any(isinstance(r, NoScriptError) for r in res):
                    continue
                break
            out.append(durable_replies(res))
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
        return parse_all(calls, raws)

    async def _pipeline(self, calls: Sequence[Call[Any]], *, text: bool = False) -> list[Any]:
        """See SyncRunner._pipeline."""
        if self._pool is not None:
            return await self.send([as_eval(pack(c), c.script) if text else pack(c) for c in calls])
        pipe = self.redis.pipeline(transaction=False)
        for c in calls:
            (queue_eval if text else queue_call)(pipe, c)
        return list(await pipe.execute(raise_on_error=False))
