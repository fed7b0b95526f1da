"""`asynqpy user add|ls|rm|passwd|role|queue-role`: manage the dashboard's users file (see webui.users).

Each change is also written to the audit log (user: the OS account, role "cli") and rm/passwd end the user's
open dashboard sessions, when Redis can be reached; the users file is what counts either way. A command that
changes nothing (role set to the one the user has, queue-role with no change) writes and records nothing.
"""

from __future__ import annotations

import argparse
import getpass
import json
import os
import sys
from pathlib import Path
from typing import Any

from asynqpy.errors import InvalidArgumentError, UsageError
from asynqpy.terminal import say
from webui.users import (
    MIN_PASSWORD,
    QUEUE_ROLES,
    ROLES,
    UserNotFoundError,
    UsersFile,
    check_name,
    check_password,
    parse_queue_role,
)

STDIN_HELP = f"read the password (at least {MIN_PASSWORD} characters) from one line of stdin"


def _common() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(add_help=False)
    p.add_argument("--users", metavar="PATH", default=None,
                   help="the users file (default: ASYNQPY_WEB_USERS, else ./asynqpy-users.toml)")
    p.add_argument("--redis-url", default=argparse.SUPPRESS,
                   help="where the dashboard keeps its audit log and sessions (default: as for other commands)")
    return p


def _password(args: argparse.Namespace) -> str:
    """The new password: one line of stdin with --password-stdin, else asked twice on the terminal."""
    if args.password_stdin:
        line = sys.stdin.readline()
        if not line:
            raise UsageError("--password-stdin: stdin is empty")
        return check_password(line.rstrip("\r\n"))
    if not sys.stdin.isatty():
        raise UsageError("no terminal to ask for the password: use --password-stdin")
    first = getpass.getpass("Password: ")
    if first != getpass.getpass("Password (again): "):
        raise UsageError("the passwords do not match")
    return check_password(first)


def _record(args: argparse.Namespace, action: str, name: str, detail: str, *, end_sessions: bool = False) -> str:
    """Best effort, through Redis: write the change to the audit log (user: the OS account that ran the command,
    role "cli") and, for rm and passwd, end the user's dashboard sessions. Returns a note for the output."""
    try:
        from asynqpy.embedded import default_redis_url
        from inspector.api import Inspector
        from inspector.audit import AuditLog
        from inspector.auditkey import ENV_DIR
        from inspector.webstate import SessionStore

        users = UsersFile(args.users)
        where = Path(os.environ.get(ENV_DIR) or users.path.resolve().parent)  # as the dashboard's (webui.audit)
        with Inspector(getattr(args, "redis_url", None) or default_redis_url()) as insp:
            insp.redis.connection_pool.connection_kwargs["socket_connect_timeout"] = 2
            AuditLog.open(insp.door, where, writer=True).append(
                action, outcome="ok", user=_os_user(), role="cli", addr="localhost", detail=f"{name}: {detail}")
            n = SessionStore(insp.redis).end_user(name) if end_sessions else 0
        return f"; ended {n} dashboard session(s)" if n else ""
    except Exception as exc:  # Redis down or elsewhere: the users file is what counts; the dashboard rechecks it
        return f" (not in the audit log: Redis unreachable: {exc.__class__.__name__})"


def _os_user() -> str:
    try:
        return getpass.getuser()
    except Exception:
        return "unknown"


def _queue_roles(given: list[str] | None) -> dict[str, str]:
    """--queue-role PATTERN=ROLE options as {pattern: role}. Raises UsageError for a bad one."""
    out = {}
    for text in given or ():
        try:
            pattern, role = parse_queue_role(text)
        except InvalidArgumentError as exc:
            raise UsageError(f"--queue-role: {exc}") from None
        out[pattern] = role
    return out


def _describe(queues: dict[str, str] | tuple[tuple[str, str], ...]) -> str:
    items = queues.items() if isinstance(queues, dict) else queues
    return ", ".join(f"{p}={r}" for p, r in items)


def _add(args: argparse.Namespace) -> int:
    users = UsersFile(args.users)
    check_name(args.name)
    queues = _queue_roles(args.queue_role)
    if users.get(args.name) is not None and not args.replace:
        raise UsageError(f"user {args.name!r} already exists in {users.path}; use `asynqpy user passwd` or --replace")
    users.add(args.name, args.role, _password(args), replace=args.replace, queue_roles=queues)
    more = f"; on queues {_describe(queues)}" if queues else ""
    note = _record(args, "user.add", args.name, f"added as {args.role}{more}", end_sessions=args.replace)
    say(f"added {args.name} ({args.role}{more}) to {users.path}{note}")
    return 0


def _queue_role(args: argparse.Namespace) -> int:
    users = UsersFile(args.users)
    user = users.get(args.name)
    if user is None:
        raise UserNotFoundError(f"no user {args.name!r} in {users.path}")
    queues = {} if args.clear else dict(user.queues)
    for pattern in args.remove or ():
        if queues.pop(pattern, None) is None:
            raise UsageError(f"{args.name} has no role on queue pattern {pattern!r}")
    queues.update(_queue_roles(args.set))
    shown = _describe(queues) or "none (the user's role applies to every queue)"
    if queues == dict(user.queues):  # only shown, or set to what they were: nothing to write or audit
        say(f"{args.name} ({user.role}) queue roles: {shown}")
        return 0
    users.set_queue_roles(args.name, queues)
    note = _record(args, "user.queue_role", args.name, f"queue roles set to {shown}")
    say(f"{args.name} ({user.role}) queue roles: {shown}{note}")
    return 0


def _ls(args: argparse.Namespace) -> int:
    users = UsersFile(args.users)
    rows = users.all()
    if getattr(args, "json", False):
        say(json.dumps([{"name": u.name, "role": u.role, "queues": dict(u.queues)} for u in rows]))
    elif not rows:
        say(f"no users in {users.path}: add one with `asynqpy user add NAME --role admin`")
    else:
        width = max(len(u.name) for u in rows)
        say(f"{'NAME'.ljust(width)}  {'ROLE'.ljust(8)}  QUEUE ROLES")
        for u in rows:
            say(f"{u.name.ljust(width)}  {u.role.ljust(8)}  {_describe(u.queues) or '-'}".rstrip())
    return 0


def _rm(args: argparse.Namespace) -> int:
    users = UsersFile(args.users)
    users.remove(args.name)
    say(f"removed {args.name} from {users.path}{_record(args, 'user.rm', args.name, 'removed', end_sessions=True)}")
    return 0


def _passwd(args: argparse.Namespace) -> int:
    users = UsersFile(args.users)
    if users.get(args.name) is None:
        raise UserNotFoundError(f"no user {args.name!r} in {users.path}")
    users.set_password(args.name, _password(args))
    note = _record(args, "user.passwd", args.name, "password changed", end_sessions=True)
    say(f"changed the password of {args.name}{note}")
    return 0


def _role(args: argparse.Namespace) -> int:
    users = UsersFile(args.users)
    user = users.get(args.name)
    if user is None:
        raise UserNotFoundError(f"no user {args.name!r} in {users.path}")
    if user.role == args.role:  # nothing to write or audit
        say(f"{args.name} is {args.role} already")
        return 0
    users.set_role(args.name, args.role)
    say(f"{args.name} is now {args.role}{_record(args, 'user.role', args.name, f'role set to {args.role}')}")
    return 0


def register(subparsers: Any) -> None:
    """Add `asynqpy user ...` to an argparse subparsers object (entry point asynqpy.commands: user)."""
    c = [_common()]
    user = subparsers.add_parser("user", help="manage dashboard users (names, roles, passwords)").add_subparsers(
        dest="user_command", metavar="subcommand", required=True)
    text = f"add a user (a password of at least {MIN_PASSWORD} characters, from a prompt or --password-stdin)"
    p = user.add_parser("add", parents=c, help=text, description=text)
    p.add_argument("name", help="the user's login name")
    p.add_argument("--role", choices=ROLES, required=True,
                   help="viewer reads; operator also acts on tasks and pauses queues; admin does everything")
    p.add_argument("--password-stdin", action="store_true", help=STDIN_HELP)
    p.add_argument("--replace", action="store_true", help="replace a user of that name")
    p.add_argument("--queue-role", action="append", metavar="PATTERN=ROLE",
                   help="a role on queues matching PATTERN (e.g. 'billing:*=operator'; role none hides them); "
                        "repeat for more; the most specific pattern wins")
    p.set_defaults(func=_add)
    p = user.add_parser("ls", parents=c, help="list users and roles", description="list users and roles")
    p.add_argument("--json", action="store_true", default=argparse.SUPPRESS, help="print JSON")
    p.set_defaults(func=_ls)
    for name, fn, text in (("rm", _rm, "remove a user and end their sessions"),
                           ("passwd", _passwd, "set a user's password and end their sessions")):
        p = user.add_parser(name, parents=c, help=text, description=text)
        p.add_argument("name", help="the user's login name")
        if name == "passwd":
            p.add_argument("--password-stdin", action="store_true", help=STDIN_HELP)
        p.set_defaults(func=fn)
    p = user.add_parser("role", parents=c, help="change a user's role", description="change a user's role")
    p.add_argument("name", help="the user's login name")
    p.add_argument("role", choices=ROLES, help="the new role: viewer, operator or admin")
    p.set_defaults(func=_role)
    text = "set or remove a user's roles on queue patterns (the user's role applies elsewhere)"
    p = user.add_parser("queue-role", parents=c, help=text, description=text)
    p.add_argument("name", help="the user's login name")
    p.add_argument("set", nargs="*", metavar="PATTERN=ROLE",
                   help=f"e.g. 'billing:*=operator' ('*' ? [...] as in shell globs; role one of "
                        f"{', '.join(QUEUE_ROLES)})")
    p.add_argument("--remove", action="append", metavar="PATTERN", help="drop the role on this pattern")
    p.add_argument("--clear", action="store_true", help="drop every queue role first")
    p.set_defaults(func=_queue_role)
