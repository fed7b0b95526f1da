"""The tamper-evident audit log of actions: records chained by HMAC in the Redis stream asynqpy:{audit}.

Each record is one stream entry whose field ``r`` holds the record as canonical JSON (sorted keys, no spaces).
A record carries ``seq`` (1, 2, 3, ... across the log's life), ``prev`` (the MAC of the record before it, ""
for the first) and ``mac``: HMAC-SHA256, under a key kept outside Redis (inspector.auditkey), of the canonical
JSON of every other field. The head (mac, seq and stream id of the newest record) is kept in
asynqpy:{audit}:head, and a record is appended by one Lua script that checks the head is still the one it was
chained to, so concurrent writers (every gunicorn worker) build one chain. Each append also moves the anchor
file (the newest seq and MAC, outside Redis) forward, and the JSON line of every record goes to the
``asynqpy.audit`` logger of the dashboard.

Nothing leaves the stream silently: past the cap, the oldest records are first appended to the spill file
(JSON lines) and then trimmed by a checkpoint record (action ``audit.checkpoint``, ``keep_from`` the first seq
kept) written in the same Lua step. inspector.auditverify checks all of it. Refused and failed requests are
not here: they are counted apart (inspector.auditrefused), so no flood of them can push an action out.

Used by webui (``AuditLog.open(...)``) and by ``asynqpy audit ls|verify|refused``.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import re
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import redis

from asynqpy.errors import AsynqError, InvalidArgumentError
from asynqpy.rdb import keys
from asynqpy.rdb.scripts import Call
from asynqpy.rdb.syncdoor import SyncDoor
from inspector.auditkey import ANCHOR_FILE, SPILL_FILE, AnchorFile, AuditKeyMissingError, load_key, spill
from inspector.scripts import script

log = logging.getLogger("asynqpy.audit")
STREAM = keys.AUDIT_STREAM
HEAD = keys.AUDIT_HEAD
TRIM_LOCK = keys.AUDIT_TRIM_LOCK
CHECKPOINT = "audit.checkpoint"
DEFAULT_CAP = 100_000
MAX_IDS = 100  # task ids kept in one record; the count says how many there were
MAX_DETAIL = 2000
OUTCOMES = ("ok", "partial", "failed", "error", "denied", "canceled")  # the usual ones; any short word is kept
_RETRIES = 50
_STREAM_ID = re.compile(r"(\d{1,20})(?:-(\d{1,20}))?")


@dataclass(frozen=True)
class AuditRecord:
    """One audit record. time: Unix seconds; id: the stream entry id ("" before it is stored); keep_from: for a
    checkpoint, the first seq the log still holds (older ones were spilled and trimmed), else 0."""

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
    keep_from: int = 0
    mac: str = ""
    id: str = field(default="", compare=False)

    @property
    def when(self) -> datetime:
        return datetime.fromtimestamp(self.time, tz=UTC)

    def body(self) -> dict[str, Any]:
        """The fields the MAC covers (everything but mac and id)."""
        d = asdict(self)
        d.pop("mac")
        d.pop("id")
        d["task_ids"] = list(self.task_ids)
        return d

    def to_json(self) -> str:
        """One JSON line: the stored fields plus id and an ISO time, for logs, exports and the spill file."""
        d = self.body()
        d["mac"] = self.mac
        d["id"] = self.id
        d["iso_time"] = self.when.isoformat(timespec="milliseconds").replace("+00:00", "Z")
        return json.dumps(d, sort_keys=True, ensure_ascii=False)


def canonical(d: dict[str, Any]) -> str:
    return json.dumps(d, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def record_mac(key: bytes, body: dict[str, Any]) -> str:
    """HMAC-SHA256 hex of a record's canonical JSON without its mac (prev is inside, which makes the chain)."""
    return hmac.new(key, canonical(body).encode(), hashlib.sha256).hexdigest()


def check_stream_id(value: str, name: str = "before") -> str:
    """value if it is a stream id a listing can start before ("1700000000000-0" or "1700000000000").

    Raises InvalidArgumentError naming the argument otherwise (0-0: nothing comes before it).
    """
    m = _STREAM_ID.fullmatch(value)
    if m is None or any(int(p) > 2**64 - 1 for p in m.groups() if p is not None):
        raise InvalidArgumentError(f"{name}: {value[:40]!r} is not a record id (e.g. 1767225600000-0)", argument=name)
    if int(m.group(1)) == 0 and int(m.group(2) or 0) == 0:
        raise InvalidArgumentError(f"{name}: no record comes before {value!r}", argument=name)
    return value


@dataclass(frozen=True)
class AuditPage:
    """Records newest first; next_before resumes the listing (None at the end)."""

    records: tuple[AuditRecord, ...]
    next_before: str | None


@dataclass(frozen=True)
class Trimmed:
    """What the newest checkpoint says (as the head holds it, for display): records before seq keep_from left
    the stream; checkpoint_id is that checkpoint's stream id."""

    keep_from: int
    checkpoint_id: str


def parse_entry(entry_id: bytes | str, fields: dict[bytes, bytes]) -> AuditRecord:
    """The record of one stream entry. Raises ValueError when it is not one of ours."""
    sid = _sid(entry_id)
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
            prev=str(d.get("prev", "")), keep_from=int(d.get("keep_from", 0)), mac=str(d.get("mac", "")), id=sid)
    except (KeyError, TypeError, ValueError) as exc:
        raise ValueError(f"entry {sid} is not a readable audit record: {exc}") from None


class AuditLog:
    """Appends, lists and reads the audit chain on a binary redis.Redis connection, or the door
    (asynqpy.rdb.syncdoor) of one, through which every command goes.

    key: the HMAC key (None: this log can list but not append). cap: past this many records the oldest are
    spilled and trimmed by a checkpoint (trimming keeps about 90% of cap). anchor: the anchor file to move
    forward (None: none). spill_to: the JSON-lines file trimmed records are appended to first (None: only the
    asynqpy.audit log lines hold them). clock: Unix seconds. Every method raises RedisUnavailableError (the
    subclass of its kind) for Redis trouble that passes, RedisCommandError for a command Redis refused.
    """

    def __init__(self, connection: redis.Redis | SyncDoor, *, key: bytes | None = None, cap: int = DEFAULT_CAP,
                 anchor: AnchorFile | None = None, spill_to: Path | None = None,
                 clock: Callable[[], float] = time.time) -> None:
        if isinstance(cap, bool) or not isinstance(cap, int) or cap < 2:
            raise InvalidArgumentError(f"cap must be an int of at least 2, got {cap!r}", argument="cap")
        self.door = SyncDoor.of(connection)
        self.key = key
        self.cap = cap
        self.anchor = anchor
        self.spill_to = spill_to
        self.clock = clock

    @classmethod
    def open(cls, connection: redis.Redis | SyncDoor, directory: Path, *, writer: bool, cap: int = DEFAULT_CAP,
             clock: Callable[[], float] = time.time) -> AuditLog:
        """The log with the key, anchor and spill file of an audit directory (inspector.auditkey). A writer makes
        the key when there is none.

        Raises AuditKeyMissingError for a reader when there is no key, OSError when the key file cannot be read
        or made.
        """
        key = load_key(directory, create=writer)
        return cls(connection, key=key, cap=cap, anchor=AnchorFile(directory / ANCHOR_FILE),
                   spill_to=directory / SPILL_FILE, clock=clock)

    def append(self, action: str, *, outcome: str, user: str = "", role: str = "", addr: str = "",
               queue: str | None = None, task_ids: list[str] | tuple[str, ...] | None = None,
               count: int | None = None, detail: str | None = None, request_id: str = "") -> AuditRecord:
        """Chain and store one record; returns it as stored (with seq, prev, mac and id). Past the cap, the
        oldest records are spilled and trimmed by a checkpoint afterwards.

        At most MAX_IDS task ids are kept (count defaults to how many were given). Raises InvalidArgumentError
        for a blank action or an outcome that is not a short word, AuditKeyMissingError without a key,
        RedisUnavailableError, OSError when the anchor or spill file cannot be written.
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
        rec, length = self._chain(base)
        if length > self.cap:
            try:
                self._trim(length)
            except (OSError, AsynqError) as exc:  # nothing was trimmed: the stream stays past the cap until it can
                log.error("audit log past its cap of %d but not trimmed (no record is dropped unspilled): %s",
                          self.cap, exc)
        return rec

    def _chain(self, base: AuditRecord, trim_to: tuple[str, int] | None = None) -> tuple[AuditRecord, int]:
        """Store base as the next record of the chain (retrying when another writer got there first), move the
        anchor, and return the record and the stream's length."""
        if self.key is None:
            raise AuditKeyMissingError("this audit log has no key to chain records with")
        keep_id, keep_from = trim_to or ("", 0)
        head_mac, head_seq = self.door.command("HMGET", HEAD, "mac", "seq")
        for _ in range(_RETRIES):
            prev = head_mac.decode() if head_mac else ""
            seq = int(head_seq) + 1 if head_seq else 1
            body = base.body() | {"seq": seq, "prev": prev}
            mac = record_mac(self.key, body)
            reply: list[Any] = self.door.run(Call(script("audit_append"), (STREAM, HEAD),
                                                  (prev, canonical(body | {"mac": mac}), mac, seq, keep_id,
                                                   keep_from), list))
            if int(reply[0]) == 1:
                rec = AuditRecord(**{**body, "task_ids": base.task_ids, "mac": mac, "id": _sid(reply[1])})
                if self.anchor is not None:
                    try:
                        self.anchor.advance(seq, mac, rec.id, keep_from or None)
                    except OSError as exc:  # the record is stored; verify will say the anchor lags behind
                        log.error("could not move the audit anchor %s to seq %d: %s", self.anchor.path, seq, exc)
                return rec, int(reply[2])
            head_mac, head_seq = self.door.command("HMGET", HEAD, "mac", "seq")
        raise AsynqError("the audit log is too busy: could not append a record after many attempts")

    def _trim(self, length: int) -> None:
        """Spill the oldest records past ~90% of the cap, then trim them by a checkpoint (one writer at a time:
        the others go on; the next append past the cap tries again)."""
        if not self.door.command("SET", TRIM_LOCK, b"1", "NX", "EX", 60):
            return
        try:
            keep = self.cap - max(1, self.cap // 10)
            gone = self.door.command("XRANGE", STREAM, "-", "+", "COUNT", length - keep + 1)
            if len(gone) < length - keep + 1:
                return
            first_kept = gone.pop()
            records = [parse_entry(sid, f) for sid, f in gone]
            kept = parse_entry(*first_kept)
            where = "not spilled: the asynqpy.audit log lines hold them"
            if self.spill_to is not None:
                spill(self.spill_to, [r.to_json() for r in records])
                where = f"spilled to {self.spill_to}"
            first = records[0].seq if records else kept.seq
            ckpt = AuditRecord(action=CHECKPOINT, outcome="ok", time=round(self.clock(), 6), count=len(records),
                               detail=f"records seq {first}..{kept.seq - 1} trimmed by the cap of {self.cap}; "
                                      f"{where}", keep_from=kept.seq)
            self._chain(ckpt, trim_to=(kept.id, kept.seq))
        finally:
            self.door.command("DEL", TRIM_LOCK)

    def trimmed(self) -> Trimmed | None:
        """What the newest checkpoint says (from the head; for display), None when nothing was ever trimmed."""
        keep_from, ckpt = self.door.command("HMGET", HEAD, "keep_from", "ckpt")
        return Trimmed(int(keep_from), _sid(ckpt)) if keep_from and ckpt else None

    def list(self, *, user: str | None = None, action: str | None = None, queue: str | None = None,
             since: float | None = None, until: float | None = None, before: str | None = None,
             limit: int = 100, max_scan: int = 10_000) -> AuditPage:
        """Records newest first, filtered by exact user, action (or action prefix ending in "*") and queue,
        and by time (Unix seconds, since inclusive, until exclusive).

        Reads at most max_scan entries from before (a stream id, exclusive) back; next_before resumes.
        Raises InvalidArgumentError for a bad limit or before, RedisUnavailableError.
        """
        if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= 10_000:
            raise InvalidArgumentError(f"limit must be between 1 and 10000, got {limit!r}", argument="limit")
        top = f"({check_stream_id(before)}" if before else "+"
        out: list[AuditRecord] = []
        scanned = 0
        last_id: str | None = None
        while scanned < max_scan:
            batch = self.door.command("XREVRANGE", STREAM, top, "-", "COUNT", min(500, max_scan - scanned))
            if not batch:
                return AuditPage(tuple(out), None)
            for entry_id, fields in batch:
                scanned += 1
                try:
                    rec = parse_entry(entry_id, fields)
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
        while True:
            entries = self.door.command("XRANGE", STREAM, start, "+", "COUNT", batch)
            for entry_id, fields in entries:
                yield _sid(entry_id), fields
            if len(entries) < batch:
                return
            start = f"({_sid(entries[-1][0])}"

    def head(self) -> tuple[str | None, int]:
        """The head's MAC (None when there is no head) and seq. Raises RedisUnavailableError."""
        mac, seq = self.door.command("HMGET", HEAD, "mac", "seq")
        return (mac.decode() if mac else None), int(seq or 0)


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
