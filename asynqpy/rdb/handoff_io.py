"""The hand-off lanes' commands: offers to take a queue's next task (scripts), and the blocking pop of what an
enqueue script handed over (a plain BLPOP on the lane's own connection: a script cannot block)."""

from __future__ import annotations

from typing import Any

from asynqpy.rdb import keys
from asynqpy.rdb.broker import exact, not_after
from asynqpy.rdb.scripts import Call, script


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
    connection of its own, made from the client's pool and held for good, and reads the reply straight off it:
    an idle worker's pickup is this pop's return path, and the client's per-command layers (pool checkout,
    response callbacks, release) cost a tenth of a millisecond there when the process wakes from idle. On a
    Redis Cluster (direct=False: the client routes by slot) it is the client's own blpop."""

    def __init__(self, client: Any, *, direct: bool) -> None:
        self.client = client
        self._pool = client.connection_pool if direct else None
        self._conn: Any = None

    async def pop(self, boxes: list[str], timeout: float) -> tuple[bytes, bytes] | None:
        """The first task handed to one of these hand-off lists within timeout s: (list key, element), else None."""
        if self._pool is None:
            item = await self.client.blpop(boxes, timeout=timeout)
        else:
            conn = self._conn
            if conn is None:
                conn = self._conn = self._pool.make_connection()
            try:
                if not conn.is_connected:  # connect() as the pool does: a Sentinel's connection asks for the primary
                    await conn.connect()
                await conn.send_command("BLPOP", *boxes, timeout)
                item = await conn.read_response()  # the socket timeout (10 s) is well past the block
            except BaseException:
                # a broken, timed-out or cancelled read may leave a reply on the wire: the next pop reconnects
                await conn.disconnect(nowait=True)
                raise
        return None if item is None else (bytes(item[0]), bytes(item[1]))

    async def aclose(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            await conn.disconnect()


async def push_back(conn: Any, box: str, element: bytes) -> None:
    """Put a popped element back at the head of its hand-off list (its requeue failed: the next drain finds it)."""
    await conn.lpush(box, element)
