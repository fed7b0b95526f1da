"""`asynqpy audit ls|verify`: read the dashboard's audit log and check its hash chain (see inspector.audit)."""

from __future__ import annotations

import argparse
import json
from datetime import UTC, datetime
from typing import Any

from asynqpy.embedded import default_redis_url
from asynqpy.errors import UsageError
from inspector.api import Inspector
from inspector.audit import AuditLog


def _log(args: argparse.Namespace) -> tuple[Inspector, AuditLog]:
    insp = Inspector(getattr(args, "redis_url", None) or default_redis_url())
    return insp, AuditLog(insp.redis)


def _when(value: str | None, name: str) -> float | None:
    if not value:
        return None
    try:
        dt = datetime.fromisoformat(value)
    except ValueError:
        raise UsageError(f"--{name}: {value!r} is not an ISO date or time (e.g. 2026-05-01T12:00)") from None
    return (dt if dt.tzinfo else dt.replace(tzinfo=UTC)).timestamp()


def _ls(args: argparse.Namespace) -> int:
    insp, log = _log(args)
    with insp:
        page = log.list(user=args.user, action=args.action, queue=args.queue, since=_when(args.since, "since"),
                        until=_when(args.until, "until"), limit=args.limit, max_scan=max(10_000, args.limit * 10))
    if getattr(args, "json", False):
        for rec in page.records:
            print(rec.to_json())
        return 0
    if not page.records:
        print("no audit records match")
        return 0
    for r in reversed(page.records):  # oldest first, like a log
        what = " ".join(x for x in (r.queue and f"queue={r.queue}", r.count is not None and f"count={r.count}",
                                    r.task_ids and f"ids={','.join(r.task_ids[:5])}") if x)
        print(f"{r.when:%Y-%m-%d %H:%M:%S}Z #{r.seq} {r.user or '-'}({r.role or '-'}) {r.addr or '-'} "
              f"{r.action} {r.outcome} {what} {r.detail}".rstrip())
    return 0


def _verify(args: argparse.Namespace) -> int:
    insp, log = _log(args)
    with insp:
        v = log.verify()
    if getattr(args, "json", False):
        print(json.dumps({"ok": v.ok, "checked": v.checked, "first_seq": v.first_seq, "last_seq": v.last_seq,
                          "broken": v.broken.__dict__ if v.broken else None}))
    elif v.ok:
        trimmed = f" (records before seq {v.first_seq} were trimmed by the cap)" if v.first_seq > 1 else ""
        print(f"audit chain intact: {v.checked} record(s), seq {v.first_seq}..{v.last_seq}{trimmed}"
              if v.checked else "audit log is empty")
    else:
        b = v.broken
        assert b is not None
        print(f"audit chain BROKEN at record seq {b.seq} (stream id {b.id or '-'}): {b.kind}: {b.reason}; "
              f"{v.checked} record(s) checked")
    return 0 if v.ok else 1


def register(subparsers: Any) -> None:
    """Add `asynqpy audit ls|verify` (entry point asynqpy.commands: audit)."""
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--redis-url", default=argparse.SUPPRESS,
                        help="default: ASYNQPY_REDIS_URL, REDIS_URL, the `asynqpy dev` server, then localhost")
    common.add_argument("--json", action="store_true", default=argparse.SUPPRESS,
                        help="JSON lines (ls) or one JSON object (verify)")
    audit = subparsers.add_parser("audit", help="the dashboard's audit log").add_subparsers(
        dest="audit_command", metavar="subcommand", required=True)
    text = "list audit records (newest last), filtered by user, action, queue and time"
    p = audit.add_parser("ls", parents=[common], help=text, description=text)
    p.add_argument("--user", help="only this user's records")
    p.add_argument("--action", help="an action, or a prefix ending in * (e.g. 'tasks.*')")
    p.add_argument("--queue", help="only records about this queue")
    p.add_argument("--since", help="ISO date or time, UTC unless it names a zone")
    p.add_argument("--until", help="ISO date or time, UTC unless it names a zone")
    p.add_argument("--limit", type=int, default=50, help="at most this many records (default 50)")
    p.set_defaults(func=_ls)
    p = audit.add_parser("verify", parents=[common], description="check the hash chain of the audit log: exit 1 and "
                         "name the first record that was edited, removed or reordered",
                         help="check the hash chain; exit 1 and name the first edited, removed or reordered record")
    p.set_defaults(func=_verify)
