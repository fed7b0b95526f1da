"""The hand-off lanes' commands: offers to take a queue's next task (scripts), and the blocking pop of what an
enqueue script handed over (a plain BLPOP on the lane's own connection: a script cannot block)."""

from __future__ import annotations

from typing import Any

from asynqpy.rdb import keys
from asynqpy.rdb.broker import exact, not_after
from asynqpy.rdb.scripts import Call, script


def register_waiter(q: str, server_id: str, *, until: float, prune_before: float | None = None) -> Call[int]:
    """Offer to take q's next task until `until` (Unix s); prune_before: also drop offers lapsed before it."""
    prune = "" if prune_before is None else not_after(prune_before)
    return Call(script("register_waiter"), [keys.waiters(q)], [server_id, exact(until), prune], int)


def unregister_waiter(q: str, server_id: str) -> Call[int]:
    """Withdraw this server's offer for q."""
    return Call(script("unregister_waiter"), [keys.waiters(q)], [server_id], int)


async def pop_handed(conn: Any, boxes: list[str], timeout: float) -> tuple[bytes, bytes] | None:
    """The first task handed to one of these hand-off lists within timeout s: (list key, element), else None.
    conn: the lane's own asyncio client (it blocks its connection)."""
    item = await conn.blpop(boxes, timeout=timeout)
    return None if item is None else (bytes(item[0]), bytes(item[1]))


async def push_back(conn: Any, box: str, element: bytes) -> None:
    """Put a popped element back at the head of its hand-off list (its requeue failed: the next drain finds it)."""
    await conn.lpush(box, element)
