"""Sending many packs of commands on one connection with the next pack in flight while one is answered.

enqueue_many sends its tasks a chunk (a pack of script commands) at a time. Sent one round trip after another,
Redis waits while Python packs a chunk and reads the outcome of the last, and Python waits while Redis runs
the chunk. Here pack k+1 is written before the replies of pack k are read, so Redis runs one pack while the
caller packs the next and records the last: the two overlap. Packs are taken from an iterator lazily, one
ahead of the replies.

The guarantees of SyncRunner.send hold: replies come back per pack in order; an error reply is its
exception; a broken connection is retried once (the packs written and not yet answered are written again, as
send() writes its one pack again: a re-sent enqueue finds its own task, which the caller takes as enqueued);
NOSCRIPT replies are sent again as EVAL (after the packs in flight are answered), as send_scripts() does.
Any other failure closes the connection, whose unread replies are then lost, and is raised.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any

import hiredis
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import NoScriptError, ResponseError

if TYPE_CHECKING:
    from asynqpy.rdb.async_runner import AsyncRunner
    from asynqpy.rdb.scripts import Script
    from asynqpy.rdb.sync_runner import SyncRunner

# One pack: its commands packed (RESP), and each command's script (None: no script call).
Pack = tuple[Sequence[bytes], Sequence["Script | None"]]


def _missing(pack: Pack, raws: list[Any]) -> list[int]:
    return [i for i, r in enumerate(raws) if isinstance(r, NoScriptError) and pack[1][i] is not None]


def _as_evals(pack: Pack, missing: list[int]) -> Pack:
    from asynqpy.rdb.resp import as_eval

    return [as_eval(pack[0][i], pack[1][i]) for i in missing], [None] * len(missing)  # type: ignore[arg-type]


class _SyncPipe:
    """One connection's packs in flight, written again once after the connection broke."""

    def __init__(self, conn: Any) -> None:
        self.conn = conn
        self.inflight: deque[Pack] = deque()
        self.retried = False

    def _recover(self, exc: RedisConnectionError) -> None:
        self.conn.disconnect()
        if self.retried:
            raise exc
        self.retried = True
        for pack in self.inflight:  # a failure here is the second one: raised
            self.conn.send_packed_command([b"".join(pack[0])])

    def write(self, pack: Pack) -> None:
        self.inflight.append(pack)
        try:
            self.conn.send_packed_command([b"".join(pack[0])])
        except RedisConnectionError as exc:
            self._recover(exc)

    def read(self) -> tuple[Pack, list[Any]]:
        """The oldest pack in flight with its replies."""
        pack = self.inflight[0]
        while True:
            try:
                out: list[Any] = []
                for _ in pack[0]:
                    try:
                        out.append(self.conn.read_response())
                    except ResponseError as exc:
                        out.append(exc)
                break
            except RedisConnectionError as exc:
                self._recover(exc)
        self.inflight.popleft()
        return pack, out

    def answered(self) -> list[tuple[Pack, list[Any]]]:
        """The oldest pack's replies; with every pack in flight too when one needs its scripts loaded (its
        commands sent again as EVAL now that nothing is in flight)."""
        done = [self.read()]
        if not _missing(*done[0]):
            return done
        while self.inflight:
            done.append(self.read())
        for pack, raws in done:
            missing = _missing(pack, raws)
            if missing:
                self.write(_as_evals(pack, missing))
                for i, r in zip(missing, self.read()[1], strict=True):
                    raws[i] = r
        return done


def send_overlapped(runner: SyncRunner, packs: Iterable[Pack], take: Callable[[list[Any]], None]) -> None:
    """Send each pack (lazily taken from packs) on runner's connection and call take with its raw replies, in
    order, the next pack written before this one's replies are read. Needs a plain runner (runner.plain)."""
    with runner.connection() as conn:
        pipe = _SyncPipe(conn)
        try:
            for pack in packs:
                pipe.write(pack)
                while len(pipe.inflight) > 1:
                    for _, raws in pipe.answered():
                        take(raws)
            while pipe.inflight:
                for _, raws in pipe.answered():
                    take(raws)
        except BaseException:
            if pipe.inflight:
                conn.disconnect()  # replies left unread: the connection cannot be used again
            raise


class _AsyncPipe:
    """_SyncPipe on an asyncio connection, reading its stream with one hiredis Reader (replies of the next
    pack may arrive with those of this one)."""

    def __init__(self, conn: Any) -> None:
        self.conn = conn
        self.inflight: deque[Pack] = deque()
        self.retried = False
        self._reader = hiredis.Reader(replyError=ResponseError)

    async def _recover(self, exc: RedisConnectionError) -> None:
        await self.conn.disconnect()
        if self.retried:
            raise exc
        self.retried = True
        self._reader = hiredis.Reader(replyError=ResponseError)
        for pack in self.inflight:
            await self.conn.send_packed_command([b"".join(pack[0])])

    async def write(self, pack: Pack) -> None:
        self.inflight.append(pack)
        try:
            await self.conn.send_packed_command([b"".join(pack[0])])
        except RedisConnectionError as exc:
            await self._recover(exc)

    async def _reply(self) -> Any:
        while True:
            reply = self._reader.gets()
            if reply is not False:
                if isinstance(reply, ResponseError) and str(reply).startswith("NOSCRIPT"):
                    return NoScriptError(str(reply))
                return reply
            stream = getattr(self.conn, "_reader", None)  # redis-py's asyncio.StreamReader of the connection
            chunk = await stream.read(65536) if stream is not None else b""
            if not chunk:
                raise RedisConnectionError("Connection closed by server.")
            self._reader.feed(chunk)

    async def read(self) -> tuple[Pack, list[Any]]:
        pack = self.inflight[0]
        while True:
            try:
                out = [await self._reply() for _ in pack[0]]
                break
            except RedisConnectionError as exc:
                await self._recover(exc)
        self.inflight.popleft()
        return pack, out

    async def answered(self) -> list[tuple[Pack, list[Any]]]:
        done = [await self.read()]
        if not _missing(*done[0]):
            return done
        while self.inflight:
            done.append(await self.read())
        for pack, raws in done:
            missing = _missing(pack, raws)
            if missing:
                await self.write(_as_evals(pack, missing))
                for i, r in zip(missing, (await self.read())[1], strict=True):
                    raws[i] = r
        return done


async def asend_overlapped(runner: AsyncRunner, packs: Iterable[Pack], take: Callable[[list[Any]], None]) -> None:
    """send_overlapped on an AsyncRunner's connection (taken from its pool for the call)."""
    pool = runner.pool
    conn = await pool.get_connection()
    pipe = _AsyncPipe(conn)
    try:
        for pack in packs:
            await pipe.write(pack)
            while len(pipe.inflight) > 1:
                for _, raws in await pipe.answered():
                    take(raws)
        while pipe.inflight:
            for _, raws in await pipe.answered():
                take(raws)
    except BaseException:
        if pipe.inflight:
            await conn.disconnect()
        raise
    finally:
        await pool.release(conn)
