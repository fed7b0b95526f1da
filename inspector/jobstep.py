"""A background job's chunks applied and counted once, even when a reply is lost.

Each chunk of a job has a sequence number (the job's count of chunks counted, plus one). Its script keeps a
receipt of it in the queue's own slot (keys.job_step: the job's hash lives in another slot on a cluster, so the
chunk cannot be counted in its own script); the runner sends a chunk whose reply was lost again with the same
number, and the script answers the first reply from the receipt without acting again. The count
(inspector/lua/job_progress.lua) is keyed by the same number, so one sent twice counts once.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TypeVar

from asynqpy.rdb import keys
from asynqpy.rdb.scripts import Call
from inspector.context import Ctx, text

T = TypeVar("T")


@dataclass(frozen=True)
class Receipt:
    """Where a job's chunk keeps its receipt, the chunk's sequence number, and how long the receipt lives (s)."""

    key: str
    seq: int
    ttl: int

    @classmethod
    def of(cls, queue: str, job_id: str, seq: int, ttl: int) -> Receipt:
        return cls(keys.job_step(queue, job_id), seq, ttl)


def with_receipt(call: Call[T], receipt: Receipt | None) -> Call[T]:
    """call (a chunk script: run_all, archive_all, delete_all) as a job's numbered chunk: the receipt's key after
    its KEYS, the number and TTL after its ARGV. Without a receipt (a chunk of no job), call unchanged."""
    if receipt is None:
        return call
    return Call(call.script, [*call.keys, receipt.key], [*call.args, receipt.seq, receipt.ttl], call.parse)


def kept(ctx: Ctx, receipt: Receipt) -> tuple[int, int, str] | None:
    """The reply kept for the receipt's chunk ((a, b, memo): what its script answered), or None when the chunk
    was never applied. The reply of a numbered chunk never changes once kept, so reading it is safe."""
    seq, a, b, memo = ctx.command("HMGET", receipt.key, "seq", "a", "b", "memo")
    if seq is None or text(seq) != str(receipt.seq):
        return None
    return int(a), int(b), text(memo or b"")
