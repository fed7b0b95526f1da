"""`asynqpy audit ls|verify|refused`: read the dashboard's audit log, check its chain, list refused requests.

The key and anchor are read from the audit directory (--audit-dir, ASYNQPY_AUDIT_DIR, the users file's
directory, the found `asynqpy dev` server's state directory, or the current one: see _dir); these commands
never make a key. Every line printed for people goes through asynqpy.terminal.printable, so a hostile user name
or queue name cannot drive the terminal.
"""

from __future__ import annotations

import argparse
import json
import os
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from asynqpy import cliargs
from asynqpy.devstate import find_server
from asynqpy.embedded import default_redis_url
from asynqpy.errors import UsageError
from asynqpy.terminal import say
from inspector.api import Inspector
from inspector.audit import AuditLog
from inspector.auditkey import ENV_DIR, ENV_USERS, KEY_FILE, default_dir
from inspector.auditrefused import RefusedLog
from inspector.auditverify import Verdict, verify


def _inspector(args: argparse.Namespace) -> Inspector:
    return Inspector(getattr(args, "redis_url", None) or default_redis_url())


def _dir(args: argparse.Namespace) -> Path:
    """--audit-dir, ASYNQPY_AUDIT_DIR, the users file's directory (ASYNQPY_WEB_USERS); else, when the Redis used
    is the `asynqpy dev`/`asynqpy redis` server found from here (as `audit ls` finds it) and its state directory
    holds an audit key (the dev dashboard's), that directory; else the current one."""
    if getattr(args, "audit_dir", None):
        return Path(args.audit_dir)
    if os.environ.get(ENV_DIR) or os.environ.get(ENV_USERS):
        return default_dir()
    if not getattr(args, "redis_url", None) and not any(os.environ.get(v) for v in ("ASYNQPY_REDIS_URL", "REDIS_URL")):
        found = find_server()
        if found is not None and (found.url_file.parent / KEY_FILE).is_file():
            return found.url_file.parent
    return default_dir()


def _when(value: str | None, name: str) -> float | None:
    if not value:
        return None
    try:
        dt = datetime.fromisoformat(value)
    except ValueError:
        raise UsageError(f"--{name}: {value!r} is not an ISO date or time (e.g. 2026-05-01T12:00)") from None
    return (dt if dt.tzinfo else dt.replace(tzinfo=UTC)).timestamp()


def _span(args: argparse.Namespace) -> tuple[float | None, float | None]:
    """--since and --until as timestamps. Raises UsageError for a bad one, or a --since after --until."""
    since, until = _when(args.since, "since"), _when(args.until, "until")
    if since is not None and until is not None and since > until:
        raise UsageError(f"--since {args.since} is after --until {args.until}: nothing could match")
    return since, until


def _ls(args: argparse.Namespace) -> int:
    since, until = _span(args)
    with _inspector(args) as insp:
        log = AuditLog(insp.door)
        page = log.list(user=args.user, action=args.action, queue=args.queue, since=since, until=until,
                        limit=args.limit, max_scan=max(10_000, args.limit * 10))
        trimmed = log.trimmed()
    records = page.records[::-1]  # the newest `limit` that match, printed oldest first (newest last), like a log
    if getattr(args, "json", False):
        for rec in records:
            say(rec.to_json())
        return 0
    if trimmed is not None:
        say(f"(records before seq {trimmed.keep_from} were trimmed by the cap: see the checkpoint records)")
    if not page.records:
        say("no audit records match")
        return 0
    for r in records:
        what = " ".join(x for x in (r.queue and f"queue={r.queue}", r.count is not None and f"count={r.count}",
                                    r.task_ids and f"ids={','.join(r.task_ids[:5])}") if x)
        say(f"{r.when:%Y-%m-%d %H:%M:%S}Z #{r.seq} {r.user or '-'}({r.role or '-'}) {r.addr or '-'} "
            f"{r.action} {r.outcome} {what} {r.detail}".rstrip())
    return 0


def _refused(args: argparse.Namespace) -> int:
    since, until = _span(args)
    with _inspector(args) as insp:
        rows = RefusedLog(insp.door).list(since=since, until=until, limit=args.limit)[::-1]  # newest last
    if getattr(args, "json", False):
        for c in rows:
            say(c.to_json())
        return 0
    if not rows:
        say("no refused or failed requests counted")
        return 0
    for c in rows:
        first = datetime.fromtimestamp(c.first, tz=UTC)
        ids = f" ids={','.join(c.task_ids[:5])}" if c.task_ids else ""
        say(f"{first:%Y-%m-%d %H:%M:%S}Z..{c.when:%H:%M:%S}Z x{c.count} {c.user or '-'} {c.addr or '-'} {c.action} "
            f"{c.outcome}{f' queue={c.queue}' if c.queue else ''}{ids} {c.detail}".rstrip())
    return 0


def _verify(args: argparse.Namespace) -> int:
    with _inspector(args) as insp:
        log = AuditLog.open(insp.door, _dir(args), writer=False)
        v = verify(log)
    if getattr(args, "json", False):
        say(json.dumps({"ok": v.ok, "checked": v.checked, "first_seq": v.first_seq, "last_seq": v.last_seq,
                        "anchored": v.anchored, "broken": v.broken.__dict__ if v.broken else None}))
    else:
        say(_verdict_text(v, log))
    return 0 if v.ok else 1


def _verdict_text(v: Verdict, log: AuditLog) -> str:
    unanchored = "" if v.anchored else (f"; no anchor at {log.anchor.path if log.anchor else '-'}, so the removal "
                                        "of the newest records together with the head cannot be told")
    if v.ok:
        trimmed = f" (records before seq {v.first_seq} were trimmed by checkpoints)" if v.first_seq > 1 else ""
        head = (f"audit chain intact: {v.checked} record(s), seq {v.first_seq}..{v.last_seq}{trimmed}"
                if v.checked else "audit log is empty")
        return head + unanchored
    b = v.broken
    assert b is not None
    return (f"audit chain BROKEN at record seq {b.seq} (stream id {b.id or '-'}): {b.kind}: {b.reason}; "
            f"{v.checked} record(s) checked{unanchored}")


def register(subparsers: Any) -> None:
    """Add `asynqpy audit ls|verify|refused` (entry point asynqpy.commands: audit)."""
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--redis-url", default=argparse.SUPPRESS,
                        help="default: ASYNQPY_REDIS_URL, REDIS_URL, the `asynqpy dev` server, then localhost")
    common.add_argument("--json", action="store_true", default=argparse.SUPPRESS,
                        help="JSON lines (ls, refused; in the text's order, newest last) or one JSON object (verify)")
    audit = subparsers.add_parser("audit", help="the dashboard's audit log").add_subparsers(
        dest="audit_command", metavar="subcommand", required=True)
    text = ("list audit records, filtered by user, action, queue and time: the newest --limit that match, oldest "
            "first (newest last), in text and --json alike")
    p = audit.add_parser("ls", parents=[common], help=text, description=text)
    p.add_argument("--user", help="only this user's records")
    p.add_argument("--action", help="an action, or a prefix ending in * (e.g. 'tasks.*')")
    p.add_argument("--queue", help="only records about this queue")
    _times(p)
    p.set_defaults(func=_ls)
    text = ("refused and failed requests (failed logins, refused actions), counted per 5 minutes: the newest "
            "--limit, newest last, in text and --json alike")
    p = audit.add_parser("refused", parents=[common], help=text, description=text)
    _times(p)
    p.set_defaults(func=_refused)
    p = audit.add_parser("verify", parents=[common], description="check the audit chain with its key and anchor: "
                         "exit 1 and name the first record that was edited, forged, removed or reordered, or a log "
                         "cut short at either end", help="check the chain; exit 1 and say what was tampered with")
    p.add_argument("--audit-dir", metavar="DIR", help="where the audit key and anchor are (default: "
                   "ASYNQPY_AUDIT_DIR, else the directory of ASYNQPY_WEB_USERS, else the state directory of the "
                   "`asynqpy dev` server found from here when it holds a key, else the current directory); "
                   "ASYNQPY_AUDIT_KEY gives the key itself")
    p.set_defaults(func=_verify)


def _times(p: argparse.ArgumentParser) -> None:
    p.add_argument("--since", help="ISO date or time, UTC unless it names a zone")
    p.add_argument("--until", help="ISO date or time, UTC unless it names a zone")
    p.add_argument("--limit", type=cliargs.positive, default=50, help="the newest this many (default 50)")
