"""The `asynqpy dev` add-on: the dashboard beside the demo worker, served by `asynqpy web` (gunicorn) in a child
process, with an admin account whose password is printed once (or taken from ASYNQPY_ADMIN_PASSWORD), on
--web-port (default 8080). The child's log goes to `dashboard.log` in the dev state directory; the terminal gets
a short line per audit record and the dashboard's warnings."""

from __future__ import annotations

import argparse
import json
import logging
import os
import secrets
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from asynqpy import cliargs
from asynqpy.embedded import port_is_free, stop_process
from asynqpy.errors import AsynqError, InvalidArgumentError, UsageError
from asynqpy.plugins import DevContext, RunningAddon

ADMIN = "admin"
ENV_PASSWORD = "ASYNQPY_ADMIN_PASSWORD"
READY = "asynqpy web: serving the dashboard on "
START_TIMEOUT = 60.0
log = logging.getLogger("asynqpy.dev.dashboard")


def ensure_admin(users_path: str, password: str | None) -> str | None:
    """Make sure the users file has the admin account. Returns the password to print (a new generated one), or
    None when the account already existed (its password is then unchanged, unless `password` was given)."""
    from webui.users import UsersFile, check_password, create_user

    if password:
        try:
            check_password(password)
        except InvalidArgumentError as exc:
            raise UsageError(f"{ENV_PASSWORD}: {exc}") from None
    users = UsersFile(users_path)
    if users.exists() and users.get(ADMIN) is not None:
        if password:
            users.set_password(ADMIN, password)
        return None
    fresh = password or secrets.token_urlsafe(12)  # 16 characters (96 random bits): past MIN_PASSWORD
    create_user(users_path, ADMIN, "admin", fresh)
    return None if password else fresh


def audit_line(record: dict[str, Any]) -> str:
    """A dashboard audit record (or a refused request's, {"refused": action, ...}) as one short line:
    `audit: alice (operator) task.delete critical, 3 tasks: ok`."""
    who = record.get("user") or "-"
    if record.get("role"):
        who += f" ({record['role']})"
    what = [str(record.get("action") or (f"refused {record['refused']}" if record.get("refused") else "?"))]
    if record.get("queue"):
        what.append(str(record["queue"]))
    ids = record.get("task_ids") or ()
    n = record.get("count") if record.get("count") is not None else len(ids) or None
    line = f"audit: {who} {' '.join(what)}" + (f", {n} task{'s' if n != 1 else ''}" if n else "")
    line += f": {record.get('outcome', '?')}"
    detail = str(record.get("detail") or "")
    return line + (f" ({detail[:80]}{'...' if len(detail) > 80 else ''})" if detail else "")


class DashboardError(AsynqError):
    """The dashboard's `asynqpy web` child exited at start or did not start listening in time."""


class DashboardProcess:
    """`asynqpy web` as a child: its output copied to a log file; audit records and warnings also to the terminal
    (one short line each)."""

    def __init__(self, argv: list[str], log_path: Path, pid_path: Path) -> None:
        self.log_path, self.pid_path = log_path, pid_path
        self.ready = threading.Event()
        self.url = ""
        self._file: IO[str] = open(log_path, "a", encoding="utf-8")  # noqa: SIM115 - closed in stop()
        # its own session: closing the terminal (SIGHUP) must not make gunicorn reload; dev stops it with SIGTERM
        self.proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                     text=True, start_new_session=True)
        pid_path.write_text(str(self.proc.pid))
        self._reader = threading.Thread(target=self._read, name="asynqpy-dev-dashboard-log", daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self._file.write(line)
            self._file.flush()
            self._show(line.rstrip("\n"))

    def _show(self, line: str) -> None:
        if READY in line and not self.ready.is_set():
            self.url = line.split(READY, 1)[1].split(",")[0].strip()
            self.ready.set()
            return
        _, sep, body = line.partition(" asynqpy.audit: ")
        if sep and body.startswith("{"):
            try:
                log.info("%s", audit_line(json.loads(body)))
                return
            except ValueError:
                pass
        if any(f" {level} " in f" {line} " for level in ("WARNING", "ERROR", "CRITICAL", "[ERROR]")) \
                or line.startswith("Traceback"):
            log.warning("dashboard: %s", line.split(": ", 1)[-1] if " asynqpy" in line else line)

    def wait_ready(self, timeout: float) -> None:
        """Wait until it listens. Raises DashboardError (with the log's last line) if it exits or takes too long."""
        deadline = time.monotonic() + timeout
        while not self.ready.wait(0.1):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self._reader.join(2)
                self.stop()
                tail = self.log_path.read_text(errors="replace").strip().splitlines()[-1:]
                how = "exited" if self.proc.returncode is not None else "did not answer"
                raise DashboardError(f"`asynqpy web` {how}: {tail[0] if tail else 'no output'} (log: {self.log_path})")

    def stop(self) -> None:
        stop_process(self.proc)
        self._reader.join(5)
        self._file.close()
        self.pid_path.unlink(missing_ok=True)


def stop_orphan_dashboard(pid_path: Path) -> None:
    """Stop the `asynqpy web` child an earlier dev left running when it was killed with SIGKILL."""
    try:
        pid = int(pid_path.read_text().strip())
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except (OSError, ValueError):
        return
    if b"web" in cmdline and any(b"asynqpy" in part for part in cmdline):
        os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and Path(f"/proc/{pid}").exists():
            time.sleep(0.05)
    pid_path.unlink(missing_ok=True)


@dataclass
class DashboardAddon:
    """`asynqpy dev` add-on: the dashboard under gunicorn, as `asynqpy web` serves it (one worker process)."""

    name: str = "dashboard"

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--web-port", type=cliargs.port, default=8080,
                            help="dashboard port (default 8080; 0: none)")

    def start(self, ctx: DevContext) -> RunningAddon:
        port = int(getattr(ctx.args, "web_port", 8080))
        if port == 0:
            return RunningAddon()
        ctx.state_dir.mkdir(parents=True, exist_ok=True)
        stop_orphan_dashboard(ctx.state_dir / "dashboard.pid")
        if not port_is_free(port):
            raise UsageError(f"port {port} is in use: choose another with --web-port (0: no dashboard)")
        users = str(os.environ.get("ASYNQPY_WEB_USERS") or ctx.state_dir / "users.toml")
        printed = ensure_admin(users, os.environ.get(ENV_PASSWORD))
        argv = [sys.executable, "-m", "asynqpy.cli", "web", "--bind", f"127.0.0.1:{port}", "--workers", "1",
                "--users", users, "--redis-url", ctx.redis_url]
        child = DashboardProcess(argv, ctx.state_dir / "dashboard.log", ctx.state_dir / "dashboard.pid")
        child.wait_ready(START_TIMEOUT)
        url = child.url or f"http://127.0.0.1:{port}/"
        if printed:
            login = f"log in as {ADMIN} / {printed}  (shown once; change it with `asynqpy user passwd {ADMIN} " \
                    f"--users {users}`)"
        elif os.environ.get(ENV_PASSWORD):
            login = f"log in as {ADMIN} with the password in {ENV_PASSWORD}"
        else:
            login = f"log in as {ADMIN} (password as first printed; reset: asynqpy user passwd {ADMIN} --users {users})"
        return RunningAddon(banner=[f"Dashboard: {url}  (gunicorn; log: {child.log_path})", f"           {login}",
                                    f"Metrics:   {url}metrics  (Prometheus, no login)"], stop=child.stop)


addon = DashboardAddon()
