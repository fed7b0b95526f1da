"""The hand-off lanes' commands: offers to take a queue's next task (scripts), and the blocking pop of what an
enqueue script handed over (a plain BLPOP on the lane's own connection: a script cannot block)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import hiredis
from redis.exceptions import ConnectionError, InvalidResponse, ResponseError, TimeoutError

from asynqpy.rdb import keys
from asynqpy.rdb.broker import exact, not_after
from asynqpy.rdb.resp import pack_command
from asynqpy.rdb.scripts import Call, script

SERVER_CLOSED = "Connection closed by server."  # redis-py's words, for the same event

try:  # an error reply as the exception redis-py raises for it (NOPERM -> NoPermissionError, ...)
    from redis._parsers import BaseParser

    _reply_error: Callable[[str], Exception] = BaseParser.parse_error
except ImportError:  # a redis-py that keeps it elsewhere: every error reply is a ResponseError
    _reply_error = ResponseError

Take = Callable[[bytes, bytes], bool]  # see HandedPop.pop
TAKEN: Any = object()  # HandedPop.pop's return when its take() started the task


def register_waiter(q: str, server_id: str, *, until: float, prune_before: float | None = None) -> Call[int]:
    """Offer to take q's next task until `until` (Unix s); prune_before: also drop offers lapsed before it.
    Reply: 1 registered, 0 refused because the server's hand-off list of q holds a task (its lane pops it)."""
    prune = "" if prune_before is None else not_after(prune_before)
    return Call(script("register_waiter"), [keys.waiters(q), keys.handoff(q, server_id)],
                [server_id, exact(until), prune], int)


def unregister_waiter(q: str, server_id: str) -> Call[int]:
    """Withdraw this server's offer for q."""
    return Call(script("unregister_waiter"), [keys.waiters(q)], [server_id], int)


class HandedPop:
    """The lane's blocking pop of what was handed over. On one server (or Sentinel's primary) it BLPOPs on a
    connection of its own, made and greeted (TLS, AUTH, SELECT, a Sentinel's primary) by the client's pool and
    then read by a Protocol of ours: each reply is parsed (hiredis) as its bytes arrive and settles the pop
    straight away. An idle worker's pickup is this pop's return path, and redis-py's reading layers (its stream
    reader, timeout context and parser coroutines) cost a tenth of a millisecond there when the process wakes
    from idle. On a Redis Cluster (direct=False: the client routes by slot) it is the client's own blpop."""

    def __init__(self, client: Any, *, direct: bool) -> None:
        self.client = client
        self._pool = client.connection_pool if direct else None
        self._conn: Any = None  # the redis-py connection that made the socket (it closes it)
        self._replies: _Replies | None = None
        self._grace = 10.0

    async def pop(self, boxes: list[str], timeout: float, take: Take | None = None) -> tuple[bytes, bytes] | None:
        """The first task handed to one of these hand-off lists within timeout s: (list key, element), else None.

        take(list key, element), when given, is offered the element as soon as its reply is read, in the
        connection's protocol (not on a Cluster): when it returns True it has started the task, and pop returns
        TAKEN. An idle worker's handler then starts without a round of the event loop for the pop's return."""
        if self._pool is None:
            item = await self.client.blpop(boxes, timeout=timeout)
            return None if item is None else (bytes(item[0]), bytes(item[1]))
        if self._conn is None or (self._replies is not None and self._replies.lost is not None):
            await self._connect()
        try:
            replies = self._replies
            if replies is not None:
                # The reply is due after `timeout`; past the socket timeout beyond it the server is gone.
                item = await replies.request(pack_command("BLPOP", *boxes, timeout), timeout + self._grace, take)
            else:  # a redis-py whose connection is laid out otherwise: read through it (no take)
                await self._conn.send_command("BLPOP", *boxes, timeout)
                item = await self._conn.read_response()
        except BaseException:
            # a broken, timed-out or cancelled read may leave a reply on the wire: the next pop reconnects
            await self._drop()
            raise
        if item is None or item is TAKEN:
            return item
        if isinstance(item, Exception):  # an error reply (e.g. NOPERM): the connection itself is fine
            raise item
        return bytes(item[0]), bytes(item[1])

    async def _connect(self) -> None:
        await self._drop()
        conn = self._pool.make_connection()  # type: ignore[union-attr]
        await conn.connect()  # as the pool does: a Sentinel's connection asks for the primary
        self._conn = conn
        self._grace = float(conn.socket_timeout or 10.0)
        self._replies = _Replies.take_over(conn)

    @property
    def reads_itself(self) -> bool:
        """True when the connection's replies are read by our protocol (see _Replies.take_over)."""
        return self._replies is not None

    async def _drop(self) -> None:
        conn, self._conn, self._replies = self._conn, None, None
        if conn is not None:
            await conn.disconnect(nowait=True)

    async def aclose(self) -> None:
        await self._drop()


class _Replies(asyncio.Protocol):
    """The protocol of a lane's connection once it is greeted: one request at a time, its reply parsed as its bytes
    arrive. The stream protocol redis-py made for the connection keeps only its close (its writer waits on it)."""

    def __init__(self, transport: asyncio.Transport, stream: Any) -> None:
        self.transport = transport
        self.stream = stream  # redis-py's StreamReaderProtocol: told when the connection closes
        self.reader = hiredis.Reader(protocolError=InvalidResponse, replyError=_reply_error)
        self.waiter: asyncio.Future[Any] | None = None
        self.take: Take | None = None
        self.lost: Exception | None = None

    @classmethod
    def take_over(cls, conn: Any) -> _Replies | None:
        """The protocol of redis-py's greeted connection conn from now on; None when conn is not laid out as the
        redis-py versions we know lay it (an asyncio stream reader and writer): the pop reads through redis-py."""
        transport = getattr(getattr(conn, "_writer", None), "transport", None)
        left = getattr(getattr(conn, "_reader", None), "_buffer", None)
        if transport is None or not hasattr(transport, "set_protocol") or not isinstance(left, bytearray):
            return None
        self = cls(transport, transport.get_protocol())
        if left:  # (nothing, once the greeting's replies were all read)
            self.reader.feed(bytes(left))
        transport.set_protocol(self)
        return self

    async def request(self, command: bytes, timeout: float, take: Take | None = None) -> Any:
        """Send one command and wait for its reply (an error reply as its exception, not raised); redis-py's
        TimeoutError when none comes within timeout s, its ConnectionError when the connection closes first.
        take: offered a BLPOP reply as it is read (see HandedPop.pop); TAKEN when it took it."""
        if self.lost is not None:
            raise self.lost
        loop = asyncio.get_running_loop()
        self.take = take
        waiter = self.waiter = loop.create_future()
        timer = loop.call_later(timeout, _time_out, waiter)
        self.transport.write(command)
        try:
            return await waiter
        finally:
            timer.cancel()
            self.waiter = self.take = None

    def data_received(self, data: bytes) -> None:
        reader = self.reader
        reader.feed(data)
        got = reader.gets()
        if got is False:  # not all of it yet
            return
        waiter = self.waiter
        if waiter is None or waiter.done() or reader.has_data():
            # a reply nobody asked for (or two): out of step, so the connection goes (the next pop reconnects)
            self.transport.close()
            return
        take = self.take
        if take is not None and got is not None and got.__class__ is list:
            try:
                if take(got[0], got[1]):
                    got = TAKEN
            except Exception as exc:  # a bug: the lane's loop reports it, as any error of its pass
                waiter.set_exception(exc)
                return
        waiter.set_result(got)

    def eof_received(self) -> bool:
        return False  # the transport closes itself: connection_lost follows

    def connection_lost(self, exc: Exception | None) -> None:
        self.lost = ConnectionError(SERVER_CLOSED if exc is None else f"Error while reading from Redis: {exc}")
        waiter = self.waiter
        if waiter is not None and not waiter.done():
            waiter.set_exception(self.lost)
        self.stream.connection_lost(exc)  # redis-py's writer waits for this to close


def _time_out(waiter: asyncio.Future[Any]) -> None:
    if not waiter.done():
        waiter.set_exception(TimeoutError("Timeout reading from the hand-off lane's connection"))


async def push_back(conn: Any, box: str, element: bytes) -> None:
    """Put a popped element back at the head of its hand-off list (its requeue failed: the next drain finds it)."""
    await conn.lpush(box, element)
