"""verify(): walk the audit chain (inspector.audit) and name the first thing that is not as it was written.

Checked, with the key and the anchor kept outside Redis (inspector.auditkey):
- every record's MAC (an edited record, or one forged or re-hashed without the key: "edited");
- every link: seq one more than the record before and prev its MAC ("removed", "reordered", "edited");
- the start: the oldest record is seq 1, or the first seq kept by the newest checkpoint (or by the anchor's
  floor): records taken from the start by XDEL or XTRIM, not by a checkpoint, are "truncated";
- the end: the head names the newest record ("head"), and the stream reaches the anchor's seq with the anchor's
  MAC ("rewound" when records after it are gone, "emptied" when the whole log is).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from inspector.audit import CHECKPOINT, HEAD, AuditLog, AuditRecord, parse_entry, record_mac
from inspector.auditkey import Anchor, AuditKeyMissingError


@dataclass(frozen=True)
class ChainBreak:
    """Where the chain breaks: the stream id and seq of the first bad record, and how (edited, removed,
    reordered, unreadable, truncated, head, rewound, emptied)."""

    id: str
    seq: int
    kind: str
    reason: str


@dataclass(frozen=True)
class Verdict:
    """verify()'s answer: ok, how many records were checked, the first and last seq checked, the first break,
    and whether an anchor was there to check the end against (without one, removing the newest records together
    with the head goes unnoticed)."""

    ok: bool
    checked: int
    first_seq: int
    last_seq: int
    broken: ChainBreak | None = None
    anchored: bool = False


def verify(log: AuditLog) -> Verdict:
    """Check the whole chain of log (see the module docstring).

    Raises AuditKeyMissingError when log has no key, AsynqError for an unreadable anchor file,
    RedisUnavailableError.
    """
    if log.key is None:
        raise AuditKeyMissingError("no audit key to verify the chain with")
    anchor = log.anchor.read() if log.anchor is not None else None
    prev: AuditRecord | None = None
    checked = first_seq = floor = 0
    anchor_seen = False
    entries = log.records()
    for sid, fields in entries:
        try:
            rec = parse_entry(sid, fields)
        except ValueError as exc:
            return _broken(checked, first_seq, prev, anchor, ChainBreak(sid, (prev.seq + 1) if prev else 0,
                                                                        "unreadable", str(exc)))
        checked += 1
        first_seq = first_seq or rec.seq
        brk = _check_link(log.key, prev, rec)
        if brk is not None and brk.kind == "removed" and prev is not None and _seq_later(entries, prev.seq, rec.seq):
            brk = ChainBreak(rec.id, rec.seq, "reordered",
                             f"record seq {rec.seq} comes before a record between seq {prev.seq} and it")
        if brk is None and anchor is not None and rec.seq == anchor.seq:
            anchor_seen = True
            if rec.mac != anchor.mac:
                brk = ChainBreak(rec.id, rec.seq, "edited", f"record seq {rec.seq} is not the one the anchor holds")
        if brk is not None:
            return _broken(checked, first_seq, rec, anchor, brk)
        if rec.action == CHECKPOINT and rec.keep_from:
            floor = rec.keep_from
        prev = rec
    last = prev.seq if prev else 0
    brk = _check_ends(log, prev, first_seq, floor, anchor, anchor_seen)
    return Verdict(brk is None, checked, first_seq, last, brk, anchor is not None)


def _broken(checked: int, first_seq: int, at: AuditRecord | None, anchor: Anchor | None,
            brk: ChainBreak) -> Verdict:
    return Verdict(False, checked, first_seq, at.seq if at else 0, brk, anchor is not None)


def _check_ends(log: AuditLog, last: AuditRecord | None, first_seq: int, floor: int, anchor: Anchor | None,
                anchor_seen: bool) -> ChainBreak | None:
    head_mac, head_seq = log.head()
    if last is None:
        if anchor is not None and anchor.seq > 0:
            return ChainBreak("", 0, "emptied", f"the stream holds no record, but the anchor says the log reached seq "
                              f"{anchor.seq}: the stream (and head) were deleted")
        if head_mac is not None:
            return ChainBreak("", head_seq, "emptied", f"the stream holds no record, but its head ({HEAD}) says the "
                              f"log reached seq {head_seq}")
        return None
    expected = max(floor or 1, anchor.floor if anchor else 1)
    if first_seq != expected:
        how = (f"the newest checkpoint keeps records from seq {floor}" if floor else
               "no checkpoint says any was trimmed" if expected == 1 else
               f"the anchor says no record before seq {expected} was trimmed")
        return ChainBreak("", first_seq, "truncated", f"the log starts at seq {first_seq}, but {how}: records "
                          f"before seq {first_seq} were removed (XDEL or XTRIM) without a checkpoint")
    if anchor is not None and last.seq < anchor.seq:
        return ChainBreak(last.id, last.seq, "rewound", f"the stream ends at seq {last.seq}, but the anchor says the "
                          f"log reached seq {anchor.seq}: the newest {anchor.seq - last.seq} record(s) were removed")
    if anchor is not None and not anchor_seen and anchor.seq >= first_seq:
        return ChainBreak(last.id, anchor.seq, "removed",
                          f"record seq {anchor.seq}, which the anchor holds, is missing")
    if head_mac is None:
        return ChainBreak(last.id, last.seq, "head", f"the chain's head ({HEAD}) is gone, so records after seq "
                          f"{last.seq} may have been removed with it")
    if head_mac != last.mac or head_seq != last.seq:
        return ChainBreak(last.id, head_seq, "head", f"the head names seq {head_seq} but the stream ends at seq "
                          f"{last.seq}: records after it were removed, or the head was rewritten")
    return None


def _seq_later(entries: Iterator[tuple[str, dict[bytes, bytes]]], low: int, high: int) -> bool:
    """Whether a later entry holds a seq strictly between low and high (then the gap is a move, not a loss)."""
    for sid, fields in entries:
        try:
            if low < parse_entry(sid, fields).seq < high:
                return True
        except ValueError:
            continue
    return False


def _check_link(key: bytes, prev: AuditRecord | None, rec: AuditRecord) -> ChainBreak | None:
    if not rec.mac or record_mac(key, rec.body()) != rec.mac:
        return ChainBreak(rec.id, rec.seq, "edited", f"record seq {rec.seq} does not match its MAC: it was edited, "
                          "or written by someone without the audit key")
    if prev is None:
        return None
    if rec.prev == prev.mac and rec.seq == prev.seq + 1:
        return None
    if rec.seq <= prev.seq:
        return ChainBreak(rec.id, rec.seq, "reordered", f"record seq {rec.seq} comes after seq {prev.seq}")
    if rec.seq > prev.seq + 1:
        missing = rec.seq - prev.seq - 1
        return ChainBreak(rec.id, rec.seq, "removed",
                          f"{missing} record(s) missing between seq {prev.seq} and seq {rec.seq}")
    return ChainBreak(rec.id, rec.seq, "edited",
                      f"record seq {rec.seq} does not follow seq {prev.seq}: one of them was replaced")
