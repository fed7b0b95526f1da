"""What the audit chain keeps outside Redis: the key its MACs are made with, the anchor (the newest record's seq
and MAC, and the oldest seq the log must still hold) and the file that trimmed records are spilled to.

All three live in the audit directory: ASYNQPY_AUDIT_DIR, else the directory of the dashboard's users file
(ASYNQPY_WEB_USERS), else the current directory; the dashboard puts them beside its session key. The key is
ASYNQPY_AUDIT_KEY when set, else the file ``.asynqpy-audit.key`` (random, mode 0600), made on first use by a
writer; a reader (``asynqpy audit verify``) never makes one. Someone who can write Redis but cannot read
this directory can neither forge a record nor remove one unnoticed.
"""

from __future__ import annotations

import fcntl
import json
import os
import secrets
import tempfile
from dataclasses import dataclass
from pathlib import Path

from asynqpy.errors import AsynqError

ENV_KEY = "ASYNQPY_AUDIT_KEY"
ENV_DIR = "ASYNQPY_AUDIT_DIR"
ENV_USERS = "ASYNQPY_WEB_USERS"  # the dashboard's users file (webui.users): its directory is the default
KEY_FILE = ".asynqpy-audit.key"
ANCHOR_FILE = ".asynqpy-audit.anchor"
SPILL_FILE = "asynqpy-audit-trimmed.jsonl"


class AuditKeyMissingError(AsynqError):
    """There is no audit key to check the chain with (neither ASYNQPY_AUDIT_KEY nor the key file)."""


def default_dir() -> Path:
    """ASYNQPY_AUDIT_DIR, else the users file's directory (ASYNQPY_WEB_USERS), else the current directory."""
    if os.environ.get(ENV_DIR):
        return Path(os.environ[ENV_DIR])
    users = os.environ.get(ENV_USERS)
    return Path(users).resolve().parent if users else Path.cwd()


def load_key(directory: Path, *, create: bool) -> bytes:
    """The audit key: ASYNQPY_AUDIT_KEY, else the key file in directory, made (random, mode 0600) when missing
    and create is true. Concurrent writers agree: the first to link its file in place wins.

    Raises AuditKeyMissingError (no key and create false), OSError when the file cannot be read or made.
    """
    env = os.environ.get(ENV_KEY, "").strip()
    if env:
        return env.encode()
    path = directory / KEY_FILE
    try:
        key = path.read_text().strip()
    except FileNotFoundError:
        key = ""
    if key:
        return key.encode()
    if not create:
        raise AuditKeyMissingError(f"no audit key: set {ENV_KEY}, or point {ENV_DIR} (--audit-dir) at the directory "
                                   f"holding {KEY_FILE} (the dashboard's, beside its users file)")
    key = create_key_file(path)
    if not key:
        raise OSError(f"the audit key file {path} is empty: restore it from a backup (a new key cannot check the "
                      f"records made with the old one) or set {ENV_KEY}")
    return key.encode()


def create_key_file(path: Path) -> str:
    """A random key written to path (mode 0600) unless a file is there already; the key the file holds then.
    Concurrent writers agree: the first to link its file in place wins and the others read it. Raises OSError
    when the file cannot be made or read."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".asynqpy-key-", dir=path.parent)
    try:
        os.fchmod(fd, 0o600)
        os.write(fd, (secrets.token_urlsafe(48) + "\n").encode())
        os.close(fd)
        try:
            os.link(tmp, path)
        except FileExistsError:
            pass
    finally:
        os.unlink(tmp)
    return path.read_text().strip()


@dataclass(frozen=True)
class Anchor:
    """The newest record this host appended (seq, mac, stream id) and the oldest seq the log must still hold
    (floor: 1, or where the newest checkpoint says trimming stopped)."""

    seq: int
    mac: str
    id: str
    floor: int = 1


class AnchorFile:
    """The anchor, one small JSON file; every gunicorn worker of a host writes it, under a lock, only forwards."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def read(self) -> Anchor | None:
        """The anchor, None when there is none yet. Raises AsynqError for an unreadable file."""
        try:
            text = self.path.read_text()
        except FileNotFoundError:
            return None
        try:
            d = json.loads(text)
            return Anchor(int(d["seq"]), str(d["mac"]), str(d["id"]), int(d.get("floor", 1)))
        except (ValueError, KeyError, TypeError) as exc:
            raise AsynqError(f"the audit anchor {self.path} is unreadable ({exc}): it was edited or damaged") from None

    def advance(self, seq: int, mac: str, sid: str, floor: int | None = None) -> None:
        """Record a newer record (and floor); an older one than the file holds changes nothing. Raises OSError."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
        with os.fdopen(fd, "r+") as f:
            fcntl.flock(f, fcntl.LOCK_EX)
            try:
                d = json.loads(f.read() or "{}")
            except ValueError:
                d = {}
            old_seq, old_floor = int(d.get("seq", 0)), int(d.get("floor", 1))
            new = {"seq": max(seq, old_seq), "mac": mac if seq >= old_seq else d.get("mac", ""),
                   "id": sid if seq >= old_seq else d.get("id", ""), "floor": max(floor or 1, old_floor)}
            if new != d:
                f.seek(0)
                f.truncate()
                f.write(json.dumps(new, sort_keys=True) + "\n")
                f.flush()
                os.fsync(f.fileno())


def spill(path: Path, lines: list[str]) -> None:
    """Append records (JSON lines) to the spill file, durably, before they are trimmed. Raises OSError."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    with os.fdopen(fd, "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        f.write("".join(line + "\n" for line in lines))
        f.flush()
        os.fsync(f.fileno())
