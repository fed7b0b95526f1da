"""The dashboard's users file: names, roles and scrypt password hashes in a small TOML file safe to edit by hand.

    # asynqpy dashboard users
    [users.alice]
    role = "admin"
    password = "scrypt$16384$8$1$<salt base64>$<hash base64>"

    [users.bob]
    role = "viewer"
    password = "scrypt$..."
    queues = { "billing:*" = "operator", "hr:*" = "none" }

Path: ``--users PATH``, else ASYNQPY_WEB_USERS, else ./asynqpy-users.toml (``default_users_path()``).
Roles, weakest first: viewer (reads everything but the audit log), operator (also replays, archives,
deletes and cancels single or selected tasks, pauses and resumes queues), admin (also all-in-state actions,
deleting queues, the audit log).

Per-queue roles (``queues``): a glob pattern of queue names (fnmatch: * ? [...]) to a role, or to "none" (the
queue is hidden: its pages answer 404 as for a queue that does not exist). On a queue the most specific
matching pattern wins (the one with the most characters that are not wildcards; a tie goes to the one
written first); a queue no pattern matches gets the user's role. The role alone still decides everything
not tied to one queue (the audit log needs role admin; servers and scheduler pages need viewer).

For other modules: ``create_user(path, name, role, password, replace=False)`` (the `asynqpy dev` add-on
makes its admin with it), ``UsersFile(path)`` with ``get``, ``authenticate``, ``add``, ``remove``,
``set_password``, ``set_role``, ``set_queue_roles``, ``all``; ``role_allows(have, need)``;
``User.role_on(queue)``. This module imports no Flask and no Redis.
"""

from __future__ import annotations

import base64
import fnmatch
import hashlib
import hmac
import json
import os
import re
import secrets
import tempfile
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from asynqpy.errors import AsynqError, InvalidArgumentError

ROLES = ("viewer", "operator", "admin")
NO_ACCESS = "none"  # a queue role: the queue is hidden from the user
QUEUE_ROLES = (NO_ACCESS, *ROLES)
MAX_PATTERN = 200
DEFAULT_FILE = "asynqpy-users.toml"
ENV_USERS = "ASYNQPY_WEB_USERS"
NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._@+-]{0,63}$")
# A dashboard password is a single factor, for which NIST SP 800-63B-4 (2024, section 3.1.1.2) requires at least
# 15 characters (Rev. 3's floor was 8). Checked wherever a password is set (user add, passwd, the dev admin's),
# counted in Unicode code points as NIST counts them; a login with an older, shorter one still works.
MIN_PASSWORD = 15
MAX_PASSWORD = 1024
# scrypt at N=2**14, r=8, p=1 takes ~16 MiB and some tens of ms: slow for guessing, fine for a login.
SCRYPT_N, SCRYPT_R, SCRYPT_P = 2**14, 8, 1


class UsersFileError(AsynqError):
    """The users file cannot be read or written (names the file and the problem)."""


class UserNotFoundError(AsynqError):
    """No user of that name in the users file."""


class UserExistsError(AsynqError):
    """A user of that name is already in the users file."""


@dataclass(frozen=True)
class User:
    """A signed-in (or stored) user: name, role, per-queue roles (pattern, role) as written in the users file.
    sso: signed in through the proxy header."""

    name: str
    role: str
    sso: bool = False
    queues: tuple[tuple[str, str], ...] = ()

    def can(self, need: str) -> bool:
        return role_allows(self.role, need)

    def role_on(self, queue: str) -> str:
        """The user's role on a queue: the most specific matching pattern's (see the module docstring), else
        the user's role; "none" when the queue is hidden from the user."""
        best: tuple[int, str] | None = None
        for pattern, role in self.queues:
            if fnmatch.fnmatchcase(queue, pattern):
                weight = len(pattern) - sum(pattern.count(c) for c in "*?[]")
                if best is None or weight > best[0]:
                    best = (weight, role)
        return best[1] if best else self.role

    @property
    def restricted(self) -> bool:
        """Whether some queue may be hidden from the user (a per-queue role "none")."""
        return any(role == NO_ACCESS for _, role in self.queues)


def role_allows(have: str, need: str) -> bool:
    """Whether role have includes role need (admin > operator > viewer). Raises InvalidArgumentError for an
    unknown need."""
    if need not in ROLES:
        raise InvalidArgumentError(f"unknown role {need!r}; expected one of {', '.join(ROLES)}", argument="role")
    return have in ROLES and ROLES.index(have) >= ROLES.index(need)


def default_users_path() -> Path:
    """ASYNQPY_WEB_USERS, else ./asynqpy-users.toml."""
    return Path(os.environ.get(ENV_USERS) or DEFAULT_FILE)


def check_name(name: str) -> str:
    if not isinstance(name, str) or not NAME_RE.match(name):
        raise InvalidArgumentError(
            f"user name {name!r} is not allowed: 1-64 letters, digits and . _ @ + -, starting with a letter or digit",
            argument="name")
    return name


def check_role(role: str) -> str:
    if role not in ROLES:
        raise InvalidArgumentError(f"unknown role {role!r}; expected one of {', '.join(ROLES)}", argument="role")
    return role


def check_queue_roles(roles: Mapping[str, str]) -> dict[str, str]:
    """Per-queue roles {pattern: role}, checked. Raises InvalidArgumentError naming the bad pattern or role."""
    out = {}
    for pattern, role in roles.items():
        if not isinstance(pattern, str) or not pattern or len(pattern) > MAX_PATTERN or not pattern.isprintable():
            raise InvalidArgumentError(f"queue pattern {str(pattern)[:40]!r} must be 1-{MAX_PATTERN} printable "
                                       "characters", argument="queue_role")
        if role not in QUEUE_ROLES:
            raise InvalidArgumentError(f"queue pattern {pattern!r}: unknown role {role!r}; expected one of "
                                       f"{', '.join(QUEUE_ROLES)}", argument="queue_role")
        out[pattern] = role
    return out


def parse_queue_role(text: str) -> tuple[str, str]:
    """"PATTERN=ROLE" (split at the last =) as (pattern, role). Raises InvalidArgumentError."""
    pattern, sep, role = text.rpartition("=")
    if not sep or not pattern:
        raise InvalidArgumentError(f"expected PATTERN=ROLE (e.g. 'billing:*=operator'), got {text!r}",
                                   argument="queue_role")
    return next(iter(check_queue_roles({pattern: role.strip()}).items()))


def check_password(password: str) -> str:
    """The password, when it may be set: MIN_PASSWORD to MAX_PASSWORD characters. Raises InvalidArgumentError."""
    if not isinstance(password, str) or not password:
        raise InvalidArgumentError("the password must not be empty", argument="password")
    if len(password) < MIN_PASSWORD:
        raise InvalidArgumentError(f"the password is {len(password)} character(s) long; it needs at least "
                                   f"{MIN_PASSWORD} (a passphrase of a few words will do)", argument="password")
    if len(password) > MAX_PASSWORD:
        raise InvalidArgumentError(f"the password is longer than {MAX_PASSWORD} characters", argument="password")
    return password


def _b64(b: bytes) -> str:
    return base64.b64encode(b).decode()


def hash_password(password: str) -> str:
    """scrypt$N$r$p$salt$hash (base64), with a fresh 16-byte salt."""
    salt = secrets.token_bytes(16)
    dk = hashlib.scrypt(password.encode(), salt=salt, n=SCRYPT_N, r=SCRYPT_R, p=SCRYPT_P, dklen=32)
    return f"scrypt${SCRYPT_N}${SCRYPT_R}${SCRYPT_P}${_b64(salt)}${_b64(dk)}"


def verify_password(stored: str, password: str) -> bool:
    """Whether password matches a hash_password() string; False for a malformed one (never raises)."""
    try:
        kind, n, r, p, salt, want = stored.split("$")
        if kind != "scrypt" or int(n) > 2**20 or int(r) > 32 or int(p) > 16:
            return False
        dk = hashlib.scrypt(password.encode()[:4 * MAX_PASSWORD], salt=base64.b64decode(salt), n=int(n), r=int(r),
                            p=int(p), dklen=len(base64.b64decode(want)), maxmem=2**28)
        return hmac.compare_digest(dk, base64.b64decode(want))
    except (ValueError, TypeError):
        return False


@cache
def _dummy_hash() -> str:
    """Checked against when the user does not exist, so an unknown name costs as much as a wrong password. Made
    once per process, when the first UsersFile is (not at import: a scrypt is ~70 ms, and every `asynqpy`
    command imports this module to list its subcommands)."""
    return hash_password(secrets.token_urlsafe(16))


class UsersFile:
    """The users file at path; re-read whenever it changes on disk (hand edits and `asynqpy user` take effect
    on the next request). Raises UsersFileError for a file that is not valid TOML or not in this format."""

    def __init__(self, path: str | os.PathLike[str] | None = None) -> None:
        self.path = Path(path) if path else default_users_path()
        self._stamp: tuple[int, int, int] | None = None
        self._users: dict[str, dict[str, Any]] = {}
        _dummy_hash()  # now, so the first login of an unknown name is not slower than the others

    def _load(self) -> dict[str, dict[str, Any]]:
        try:
            st = self.path.stat()
        except FileNotFoundError:
            self._stamp, self._users = None, {}
            return self._users
        stamp = (st.st_mtime_ns, st.st_size, st.st_ino)
        if stamp != self._stamp:
            self._users = read_users(self.path)
            self._stamp = stamp
        return self._users

    def exists(self) -> bool:
        return self.path.exists()

    def all(self) -> list[User]:
        """Every user, by name."""
        return [_user(n, u) for n, u in sorted(self._load().items())]

    def get(self, name: str) -> User | None:
        u = self._load().get(name)
        return _user(name, u) if u else None

    def stamp(self, name: str) -> str:
        """A short fingerprint of the user's password hash: sessions made before a password change (by command or
        by hand) no longer match it. "" for an unknown user. (A role change needs none: roles are read live.)"""
        u = self._load().get(name)
        if not u:
            return ""
        return hashlib.sha256(u["password"].encode()).hexdigest()[:16]

    def authenticate(self, name: str, password: str) -> User | None:
        """The user when name and password match, else None; an unknown name takes as long as a wrong password."""
        u = self._load().get(name) if isinstance(name, str) else None
        ok = verify_password(u["password"] if u else _dummy_hash(), password if isinstance(password, str) else "")
        return _user(name, u) if u and ok else None

    def add(self, name: str, role: str, password: str, *, replace: bool = False,
            queue_roles: Mapping[str, str] | None = None) -> User:
        """Add a user (or replace one with replace=True), with per-queue roles {pattern: role}. Raises
        UserExistsError, InvalidArgumentError."""
        check_name(name)
        check_role(role)
        check_password(password)
        queues = check_queue_roles(queue_roles or {})
        users = dict(self._load())
        if name in users and not replace:
            raise UserExistsError(f"user {name!r} already exists in {self.path}")
        users[name] = {"role": role, "password": hash_password(password), "queues": queues}
        self._save(users)
        return _user(name, users[name])

    def remove(self, name: str) -> None:
        """Raises UserNotFoundError."""
        users = dict(self._load())
        if users.pop(name, None) is None:
            raise UserNotFoundError(f"no user {name!r} in {self.path}")
        self._save(users)

    def set_password(self, name: str, password: str) -> None:
        """Raises UserNotFoundError, InvalidArgumentError."""
        self._update(name, password=hash_password(check_password(password)))

    def set_role(self, name: str, role: str) -> None:
        """Raises UserNotFoundError, InvalidArgumentError."""
        self._update(name, role=check_role(role))

    def set_queue_roles(self, name: str, queue_roles: Mapping[str, str]) -> None:
        """Replace the user's per-queue roles {pattern: role} ({} removes them). Raises UserNotFoundError,
        InvalidArgumentError."""
        self._update(name, queues=check_queue_roles(queue_roles))

    def _update(self, name: str, **fields: Any) -> None:
        users = dict(self._load())
        if name not in users:
            raise UserNotFoundError(f"no user {name!r} in {self.path}")
        users[name] = {**users[name], **fields}
        self._save(users)

    def _save(self, users: dict[str, dict[str, Any]]) -> None:
        write_users(self.path, users)
        self._stamp = None


def _user(name: str, u: Mapping[str, Any]) -> User:
    return User(name, u["role"], queues=tuple(u.get("queues", {}).items()))


def read_users(path: Path) -> dict[str, dict[str, Any]]:
    """{name: {"role", "password", "queues"}} from a users file. Raises UsersFileError naming the file and the
    problem."""
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise UsersFileError(f"cannot read the users file {path}: {exc}") from None
    table = data.get("users", {})
    if not isinstance(table, dict):
        raise UsersFileError(f"{path}: [users] must be a table of users")
    out: dict[str, dict[str, Any]] = {}
    for name, u in table.items():
        if not isinstance(u, dict) or not isinstance(u.get("password"), str) or u.get("role") not in ROLES:
            raise UsersFileError(f"{path}: user {name!r} needs role = one of {', '.join(ROLES)} and a password hash")
        queues = u.get("queues", {})
        try:
            if not isinstance(queues, dict):
                raise InvalidArgumentError("queues must be a table of queue pattern = role")
            queues = check_queue_roles(queues)
        except InvalidArgumentError as exc:
            raise UsersFileError(f"{path}: user {name!r}: {exc}") from None
        out[name] = {"role": u["role"], "password": u["password"], "queues": queues}
    return out


def write_users(path: Path, users: dict[str, dict[str, Any]]) -> None:
    """Write the users file atomically (a temporary file renamed over it), readable by its owner only."""
    lines = ["# asynqpy dashboard users: `asynqpy user add|rm|passwd` edits this file; hand edits are fine.",
             f"# role is one of {', '.join(ROLES)}; password is a hash (set it with `asynqpy user passwd NAME`).",
             "# queues = { \"billing:*\" = \"operator\" } gives a role per queue pattern (\"none\" hides them).",
             ""]
    for name in sorted(users):
        u = users[name]
        lines += [f"[users.{json.dumps(name)}]", f"role = {json.dumps(u['role'])}",
                  f"password = {json.dumps(u['password'])}"]
        if u.get("queues"):
            inner = ", ".join(f"{json.dumps(p)} = {json.dumps(r)}" for p, r in u["queues"].items())
            lines.append(f"queues = {{ {inner} }}")
        lines.append("")
    path = path.resolve()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".asynqpy-users-", dir=path.parent)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                f.write("\n".join(lines))
            os.chmod(tmp, 0o600)
            os.replace(tmp, path)
        except BaseException:
            os.unlink(tmp)
            raise
    except OSError as exc:
        raise UsersFileError(f"cannot write the users file {path}: {exc}") from None


def create_user(path: str | os.PathLike[str] | None, name: str, role: str, password: str, *,
                replace: bool = False) -> User:
    """Add a user to the users file at path (None: the default path). Raises UserExistsError (unless
    replace), InvalidArgumentError, UsersFileError."""
    return UsersFile(path).add(name, role, password, replace=replace)
