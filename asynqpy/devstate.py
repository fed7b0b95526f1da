"""Where `asynqpy dev` and `asynqpy redis` keep their state: one directory each under `.asynqpy/` (`dev/`,
`redis/`), each with the URL of its server, its data and the lock on both.

The two never share a server: the Quick start's worker (on `asynqpy redis`) and the demo worker (on
`asynqpy dev`) cannot take each other's tasks, and demo data never shows up in the Quick start. The command line
and the clients find a server from any directory below the project by walking up from the current directory to
the first `.asynqpy/` with a live server; there `asynqpy redis`'s (your own code's) comes before `asynqpy dev`'s.
A URL file whose lock nobody holds is stale (its process died) and is skipped.
"""

from __future__ import annotations

import fcntl
import os
import time
from dataclasses import dataclass
from pathlib import Path

STATE_DIR_NAME = ".asynqpy"
URL_FILE_NAME = "redis.url"
LOCALHOST_URL = "redis://127.0.0.1:6379/0"
KINDS = ("redis", "dev")  # the order commands look for a server in one .asynqpy/


@dataclass(frozen=True)
class UrlChoice:
    """A Redis URL and how it was chosen, so a failed connection can say where it looked."""

    url: str
    source: str


@dataclass(frozen=True)
class Found:
    """A live server's URL file: which command wrote it (kind), and the pid holding its lock."""

    url_file: Path
    url: str
    kind: str
    pid: int


def find_server(start: Path | None = None) -> Found | None:
    """The live `asynqpy redis`, else `asynqpy dev`, server of the nearest `.asynqpy/` in start (default: the
    current directory) or its parents that has one."""
    here = (start or Path.cwd()).resolve()
    for d in (here, *here.parents):
        if not (d / STATE_DIR_NAME).is_dir():
            continue
        for kind in KINDS:
            found = StateDir(d, kind).live()
            if found is not None:
                return found
    return None


def choose_redis_url() -> UrlChoice:
    """ASYNQPY_REDIS_URL, then REDIS_URL, then the `asynqpy redis`/`asynqpy dev` server found by walking up,
    then localhost."""
    for name in ("ASYNQPY_REDIS_URL", "REDIS_URL"):
        if os.environ.get(name):
            return UrlChoice(os.environ[name], f"from ${name}")
    found = find_server()
    if found is not None:
        return UrlChoice(found.url, f"from {found.url_file} (written by `asynqpy {found.kind}`, process "
                                    f"{found.pid or '?'})")
    return UrlChoice(LOCALHOST_URL, f"the default: ASYNQPY_REDIS_URL and REDIS_URL are not set and no "
                                    f"`asynqpy redis` or `asynqpy dev` runs in {Path.cwd()} or any parent (start a "
                                    "server with `asynqpy redis`, or pass --redis-url)")


class StateDirBusy(Exception):
    """Another live process holds the state directory's lock; .pid says which (0 when it cannot be read)."""

    def __init__(self, state_dir: Path, pid: int) -> None:
        super().__init__(f"{state_dir} is in use by process {pid or '?'}")
        self.state_dir = state_dir
        self.pid = pid


class StateDir:
    """`.asynqpy/KIND/` of one project (KIND: "dev" or "redis"): an exclusive lock (held while its server runs),
    its URL file, its data.

    The lock is an flock on `lock`, so it goes away with its process however that process ends.
    """

    def __init__(self, root: Path | None = None, kind: str = "dev") -> None:
        if kind not in KINDS:
            raise ValueError(f"kind must be one of {KINDS}, got {kind!r}")
        self.kind = kind
        self.root = (root or Path.cwd()) / STATE_DIR_NAME
        self.path = self.root / kind
        self.url_file = self.path / URL_FILE_NAME
        self.data_dir = self.path / "data"
        self._lock_fd: int | None = None

    @property
    def legacy_data_dir(self) -> Path:
        """Where asynqpy dev kept its data before dev and redis had a directory each (never used now)."""
        return self.root / "data"

    def lock(self) -> None:
        """Take the lock, writing our pid into it. Raises StateDirBusy naming the holder."""
        self.path.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path / "lock", os.O_RDWR | os.O_CREAT, 0o644)
        for attempt in range(5):  # a command looking for a server (holder()) holds it shared for a moment
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if attempt == 4:
                    holder = os.read(fd, 32).decode(errors="replace").strip()
                    os.close(fd)
                    raise StateDirBusy(self.path, int(holder) if holder.isdecimal() else 0) from None
                time.sleep(0.02)
        os.ftruncate(fd, 0)
        os.write(fd, str(os.getpid()).encode())
        self._lock_fd = fd
        self.withdraw()  # a URL left by a process that died is stale: ours comes once our server answers

    def unlock(self) -> None:
        if self._lock_fd is not None:
            os.close(self._lock_fd)  # closing releases the flock
            self._lock_fd = None

    def holder(self) -> int | None:
        """The pid of the live process holding the lock (0 if unreadable), or None when nobody holds it."""
        try:
            fd = os.open(self.path / "lock", os.O_RDONLY)
        except OSError:
            return None
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
            except BlockingIOError:
                text = os.read(fd, 32).decode(errors="replace").strip()
                return int(text) if text.isdecimal() else 0
            fcntl.flock(fd, fcntl.LOCK_UN)
            return None
        finally:
            os.close(fd)

    def live(self) -> Found | None:
        """This directory's server when its process still holds the lock and has written its URL, else None."""
        url = self.running_url()
        if not url:
            return None
        pid = self.holder()
        return None if pid is None else Found(self.url_file, url, self.kind, pid)

    def running_url(self) -> str:
        """The URL the lock holder wrote, or "" (still starting, or none)."""
        try:
            return self.url_file.read_text().strip()
        except (FileNotFoundError, NotADirectoryError):
            return ""

    def publish(self, url: str) -> None:
        self.url_file.write_text(url + "\n")

    def withdraw(self) -> None:
        self.url_file.unlink(missing_ok=True)
