"""Where `asynqpy dev` keeps its state (`.asynqpy/`): the URL of its server, its data, and the lock on both.

The command line and the clients find that server from any directory below the project by walking up from
the current directory to the first `.asynqpy/redis.url`.
"""

from __future__ import annotations

import fcntl
import os
from dataclasses import dataclass
from pathlib import Path

STATE_DIR_NAME = ".asynqpy"
URL_FILE_NAME = "redis.url"
LOCALHOST_URL = "redis://127.0.0.1:6379/0"


def find_url_file(start: Path | None = None) -> Path | None:
    """The first `.asynqpy/redis.url` in start (default: the current directory) or any of its parents."""
    here = (start or Path.cwd()).resolve()
    for d in (here, *here.parents):
        f = d / STATE_DIR_NAME / URL_FILE_NAME
        if f.is_file():
            return f
    return None


@dataclass(frozen=True)
class UrlChoice:
    """A Redis URL and how it was chosen, so a failed connection can say where it looked."""

    url: str
    source: str


def choose_redis_url() -> UrlChoice:
    """ASYNQPY_REDIS_URL, then REDIS_URL, then the `asynqpy dev` server found by walking up, then localhost."""
    for name in ("ASYNQPY_REDIS_URL", "REDIS_URL"):
        if os.environ.get(name):
            return UrlChoice(os.environ[name], f"from ${name}")
    f = find_url_file()
    if f is not None:
        url = f.read_text().strip()
        if url:
            return UrlChoice(url, f"from {f} (written by `asynqpy dev`/`asynqpy redis`; is it still running?)")
    return UrlChoice(LOCALHOST_URL, f"the default: ASYNQPY_REDIS_URL and REDIS_URL are not set and there is no "
                                    f"{STATE_DIR_NAME}/{URL_FILE_NAME} in {Path.cwd()} or any parent "
                                    "(start a server with `asynqpy redis`, or pass --redis-url)")


class StateDirBusy(Exception):
    """Another live process holds the state directory's lock; .pid says which (0 when it cannot be read)."""

    def __init__(self, state_dir: Path, pid: int) -> None:
        super().__init__(f"{state_dir} is in use by process {pid or '?'}")
        self.state_dir = state_dir
        self.pid = pid


class StateDir:
    """`.asynqpy/` of one project: an exclusive lock (held while a dev server runs), its URL file, its data.

    The lock is an flock on `.asynqpy/lock`, so it goes away with its process however that process ends.
    """

    def __init__(self, root: Path | None = None) -> None:
        self.path = (root or Path.cwd()) / STATE_DIR_NAME
        self.url_file = self.path / URL_FILE_NAME
        self.data_dir = self.path / "data"
        self._lock_fd: int | None = None

    def lock(self) -> None:
        """Take the lock, writing our pid into it. Raises StateDirBusy naming the holder."""
        self.path.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path / "lock", os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.read(fd, 32).decode(errors="replace").strip()
            os.close(fd)
            raise StateDirBusy(self.path, int(holder) if holder.isdigit() else 0) from None
        os.ftruncate(fd, 0)
        os.write(fd, str(os.getpid()).encode())
        self._lock_fd = fd

    def unlock(self) -> None:
        if self._lock_fd is not None:
            os.close(self._lock_fd)  # closing releases the flock
            self._lock_fd = None

    def running_url(self) -> str:
        """The URL the lock holder wrote, or "" (still starting, or none)."""
        try:
            return self.url_file.read_text().strip()
        except FileNotFoundError:
            return ""

    def publish(self, url: str) -> None:
        self.url_file.write_text(url + "\n")

    def withdraw(self) -> None:
        self.url_file.unlink(missing_ok=True)
