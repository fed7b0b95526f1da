"""The tamper-evident audit log: hash-chained records in the capped Redis stream asynqpy:audit.

Each record is one stream entry whose field ``r`` holds the record as canonical JSON (sorted keys, no spaces).
A record carries ``seq`` (1, 2, 3, ... across the log's life), ``prev`` (the hash of the record before it,
"" for the first) and ``hash`` (SHA-256 of the canonical JSON of every other field). The head of the chain
(hash, seq and stream id of the newest record) is kept in asynqpy:audit:head, and a record is appended by
one Lua script that checks the head is still the one it was hashed against, so concurrent writers (every
gunicorn worker) build one chain. ``verify()`` walks the stream and names the first record that was edited,
removed or reordered; the oldest records trimmed by the cap (XADD MAXLEN) are not a break.

Used by webui (through ``AuditLog(inspector.redis)``) and by ``asynqpy audit ls|verify``.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from typing import Any

import redis

from asynqpy.errors import AsynqError, InvalidArgumentError, RedisUnavailableError
from asynqpy.rdb.scripts import Call, SyncRunner
from inspector.scripts import script

STREAM = "asynqpy:audit"
HEAD = "asynqpy:audit:head"
DEFAULT_CAP = 100_000
MAX_IDS = 100  # task ids kept in one record; the count says how many there were
MAX_DETAIL = 2000
OUTCOMES = ("ok", "partial", "failed", "error", "denied", "canceled")  # the usual ones; any short word is kept
_RETRIES = 50


@contextmanager
def redis_errors() -> Iterator[None]:
    """Turn redis-py's connection errors into RedisUnavailableError (the layers above never see redis-py)."""
    try:
        yield
    except (redis.ConnectionError, redis.TimeoutError) as exc:
        raise RedisUnavailableError(f"Redis is unavailable: {exc}") from exc


@dataclass(frozen=True)
class AuditRecord:
    """One audit record. time: Unix seconds; id: the stream entry id ("" before it is stored)."""

    action: str
    outcome: str
    time: float
    user: str = ""
    role: str = ""
    addr: str = ""
    queue: str = ""
    task_ids: tuple[str, ...] = ()
    count: int | None = None
    detail: str = ""
    request_id: str = ""
    seq: int = 0
    prev: str = ""
    hash: str = ""
    id: str = field(default="", compare=False)

    @property
    def when(self) -> datetime:
        return datetime.fromtimestamp(self.time, tz=UTC)

    def body(self) -> dict[str, Any]:
        """The hashed fields (everything but hash and id)."""
        d = asdict(self)
        d.pop("hash")
        d.pop("id")
        d["task_ids"] = list(self.task_ids)
        return d

    def to_json(self) -> str:
        """One JSON line: the stored fields plus id and an ISO time, for logs and exports."""
        d = self.body()
        d["hash"] = self.hash
        d["id"] = self.id
        d["iso_time"] = self.when.isoformat(timespec="milliseconds").replace("+00:00", "Z")
        return json.dumps(d, sort_keys=True, ensure_ascii=False)


def canonical(d: dict[str, Any]) -> str:
    return json.dumps(d, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def chain_hash(body: dict[str, Any]) -> str:
    """SHA-256 hex of a record's canonical JSON without its hash (prev is inside, which makes the chain)."""
    return hashlib.sha256(canonical(body).encode()).hexdigest()


@dataclass(frozen=True)
class AuditPage:
    """Records newest first; next_before resumes the listing (None at the end)."""

    records: tuple[AuditRecord, ...]
    next_before: str | None


@dataclass(frozen=True)
class ChainBreak:
    """Where the chain breaks: the stream id and seq of the first bad record, and how (edited, removed,
    reordered, unreadable, head)."""

    id: str
    seq: int
    kind: str
    reason: str


@dataclass(frozen=True)
class Verdict:
    """verify()'s answer: ok, how many records were checked, the first seq checked (older ones were trimmed
    by the cap), and the first break."""

    ok: bool
    checked: int
    first_seq: int
    last_seq: int
    broken: ChainBreak | None = None


def _parse(entry_id: bytes | str, fields: dict[bytes, bytes]) -> AuditRecord:
    """The record of one stream entry. Raises ValueError when it is not one of ours."""
    sid = entry_id.decode() if isinstance(entry_id, bytes) else entry_id
    raw = fields.get(b"r")
    if raw is None:
        raise ValueError(f"entry {sid} has no record field")
    d = json.loads(raw)
    if not isinstance(d, dict):
        raise ValueError(f"entry {sid} is not a JSON object")
    try:
        return AuditRecord(
            action=str(d["action"]), outcome=str(d["outcome"]), time=float(d["time"]), user=str(d.get("user", "")),
            role=str(d.get("role", "")), addr=str(d.get("addr", "")), queue=str(d.get("queue", "")),
            task_ids=tuple(str(x) for x in d.get("task_ids", ())), count=d.get("count"),
            detail=str(d.get("detail", "")), request_id=str(d.get("request_id", "")), seq=int(d["seq"]),
            prev=str(d.get("prev", "")), hash=str(d.get("hash", "")), id=sid)
    except (KeyError, TypeError, ValueError) as exc:
        raise ValueError(f"entry {sid} is not a readable audit record: {exc}") from None


class AuditLog:
    """Appends, lists and verifies the audit chain on a binary redis.Redis connection.

    cap: the stream keeps at most this many records (the oldest are trimmed). clock: Unix seconds.
    Every method raises RedisUnavailableError when Redis cannot be reached.
    """

    def __init__(self, connection: redis.Redis, *, cap: int = DEFAULT_CAP,
                 clock: Callable[[], float] = time.time) -> None:
        if isinstance(cap, bool) or not isinstance(cap, int) or cap < 1:
            raise InvalidArgumentError(f"cap must be a positive int, got {cap!r}", argument="cap")
        self.redis: Any = connection  # binary replies; redis-py types them loosely
        self.runner = SyncRunner(connection)
        self.cap = cap
        self.clock = clock

    def append(self, action: str, *, outcome: str, user: str = "", role: str = "", addr: str = "",
               queue: str | None = None, task_ids: list[str] | tuple[str, ...] | None = None,
               count: int | None = None, detail: str | None = None, request_id: str = "") -> AuditRecord:
        """Chain and store one record; returns it as stored (with seq, prev, hash and id).

        At most MAX_IDS task ids are kept (count defaults to how many were given). Raises
        InvalidArgumentError for a blank action or an outcome that is not a short word, RedisUnavailableError.
        """
        if not action or not isinstance(action, str):
            raise InvalidArgumentError("action must be a non-empty str", argument="action")
        if not isinstance(outcome, str) or not outcome.isidentifier() or len(outcome) > 32:
            raise InvalidArgumentError(f"outcome must be a short word such as {', '.join(OUTCOMES)}, got {outcome!r}",
                                       argument="outcome")
        ids = tuple(str(t) for t in task_ids or ())
        if count is None and task_ids is not None:
            count = len(ids)
        base = AuditRecord(action=action, outcome=outcome, time=round(self.clock(), 6), user=user, role=role,
                           addr=addr, queue=queue or "", task_ids=ids[:MAX_IDS], count=count,
                           detail=(detail or "")[:MAX_DETAIL], request_id=request_id)
        with redis_errors():
            head_hash, head_seq = self.redis.hmget(HEAD, "hash", "seq")
            for _ in range(_RETRIES):
                prev = head_hash.decode() if head_hash else ""
                seq = int(head_seq) + 1 if head_seq else 1
                body = base.body() | {"seq": seq, "prev": prev}
                digest = chain_hash(body)
                reply: list[Any] = self.runner.run(Call(script("audit_append"), (STREAM, HEAD),
                                                        (prev, self.cap, canonical(body | {"hash": digest}), digest,
                                                         seq), list))
                if int(reply[0]) == 1:
                    sid = reply[1].decode() if isinstance(reply[1], bytes) else str(reply[1])
                    return AuditRecord(**{**body, "task_ids": ids[:MAX_IDS], "hash": digest, "id": sid})
                head_hash, head_seq = self.redis.hmget(HEAD, "hash", "seq")
        raise AsynqError("the audit log is too busy: could not append a record after many attempts")

    def list(self, *, user: str | None = None, action: str | None = None, queue: str | None = None,
             since: float | None = None, until: float | None = None, before: str | None = None,
             limit: int = 100, max_scan: int = 10_000) -> AuditPage:
        """Records newest first, filtered by exact user, action (or action prefix ending in "*") and queue,
        and by time (Unix seconds, since inclusive, until exclusive).

        Reads at most max_scan entries from before (a stream id, exclusive) back; next_before resumes.
        Raises InvalidArgumentError for a bad limit, RedisUnavailableError.
        """
        if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= 10_000:
            raise InvalidArgumentError(f"limit must be between 1 and 10000, got {limit!r}", argument="limit")
        top = f"({before}" if before else "+"
        out: list[AuditRecord] = []
        scanned = 0
        last_id: str | None = None
        with redis_errors():
            while scanned < max_scan:
                batch = self.redis.xrevrange(STREAM, top, "-", count=min(500, max_scan - scanned))
                if not batch:
                    return AuditPage(tuple(out), None)
                for entry_id, fields in batch:
                    scanned += 1
                    try:
                        rec = _parse(entry_id, fields)
                    except ValueError:
                        rec = AuditRecord(action="(unreadable)", outcome="error", time=_id_time(entry_id),
                                          id=_sid(entry_id))
                    last_id = rec.id
                    if _matches(rec, user, action, queue, since, until):
                        out.append(rec)
                        if len(out) == limit:
                            return AuditPage(tuple(out), rec.id)
                top = f"({last_id}"
        return AuditPage(tuple(out), last_id)

    def records(self, batch: int = 1000) -> Iterator[tuple[str, dict[bytes, bytes]]]:
        """Every stream entry, oldest first, as (id, raw fields). Raises RedisUnavailableError."""
        start = "-"
        with redis_errors():
            while True:
                entries = self.redis.xrange(STREAM, start, "+", count=batch)
                for entry_id, fields in entries:
                    yield _sid(entry_id), fields
                if len(entries) < batch:
                    return
                start = f"({_sid(entries[-1][0])}"

    def verify(self) -> Verdict:
        """Walk the chain oldest first and report the first record that was edited, removed or reordered.

        The oldest record still stored is trusted to start the chain (older ones may have been trimmed by the
        cap), but its own hash is checked. The newest record must match the head. Raises RedisUnavailableError.
        """
        prev: AuditRecord | None = None
        checked = 0
        first_seq = 0
        entries = self.records()
        for sid, fields in entries:
            try:
                rec = _parse(sid, fields)
            except ValueError as exc:
                return Verdict(False, checked, first_seq, prev.seq if prev else 0,
                               ChainBreak(sid, (prev.seq + 1) if prev else 0, "unreadable", str(exc)))
            checked += 1
            first_seq = first_seq or rec.seq
            brk = _check_link(prev, rec)
            if brk is not None:
                if brk.kind == "removed" and prev is not None and _seq_later(entries, prev.seq, rec.seq):
                    brk = ChainBreak(rec.id, rec.seq, "reordered",
                                     f"record seq {rec.seq} comes before a record between seq {prev.seq} and it")
                return Verdict(False, checked, first_seq, rec.seq, brk)
            prev = rec
        with redis_errors():
            head_hash, head_seq = self.redis.hmget(HEAD, "hash", "seq")
        last = prev.seq if prev else 0
        if head_hash is None and prev is not None:
            return Verdict(False, checked, first_seq, last, ChainBreak(
                prev.id, last, "head", f"the chain's head ({HEAD}) is gone, so records after seq {last} may have been "
                "removed with it"))
        if head_hash is not None and (prev is None or head_hash.decode() != prev.hash):
            seq = int(head_seq or 0)
            return Verdict(False, checked, first_seq, last, ChainBreak(
                prev.id if prev else "", seq, "removed",
                f"the newest record should be seq {seq} but the stream ends at seq {last}: "
                "records after it were removed or the newest was edited"))
        return Verdict(True, checked, first_seq, last)


def _seq_later(entries: Iterator[tuple[str, dict[bytes, bytes]]], low: int, high: int) -> bool:
    """Whether a later entry holds a seq strictly between low and high (then the gap is a move, not a loss)."""
    for sid, fields in entries:
        try:
            if low < _parse(sid, fields).seq < high:
                return True
        except ValueError:
            continue
    return False


def _check_link(prev: AuditRecord | None, rec: AuditRecord) -> ChainBreak | None:
    if chain_hash(rec.body()) != rec.hash:
        return ChainBreak(rec.id, rec.seq, "edited", f"record seq {rec.seq} does not match its hash")
    if prev is None:
        return None
    if rec.prev == prev.hash and rec.seq == prev.seq + 1:
        return None
    if rec.seq <= prev.seq:
        return ChainBreak(rec.id, rec.seq, "reordered", f"record seq {rec.seq} comes after seq {prev.seq}")
    if rec.seq > prev.seq + 1:
        missing = rec.seq - prev.seq - 1
        return ChainBreak(rec.id, rec.seq, "removed",
                          f"{missing} record(s) missing between seq {prev.seq} and seq {rec.seq}")
    return ChainBreak(rec.id, rec.seq, "edited",
                      f"record seq {rec.seq} does not follow seq {prev.seq}: one of them was replaced")


def _matches(rec: AuditRecord, user: str | None, action: str | None, queue: str | None,
             since: float | None, until: float | None) -> bool:
    if user and rec.user != user:
        return False
    if action and not (rec.action.startswith(action[:-1]) if action.endswith("*") else rec.action == action):
        return False
    if queue and rec.queue != queue:
        return False
    if since is not None and rec.time < since:
        return False
    return until is None or rec.time < until


def _sid(entry_id: bytes | str) -> str:
    return entry_id.decode() if isinstance(entry_id, bytes) else entry_id


def _id_time(entry_id: bytes | str) -> float:
    return int(_sid(entry_id).split("-")[0]) / 1000
