"""`asynqpy dev` and `asynqpy redis`: a private Valkey (+ a demo worker, a demo producer and the installed dev
add-ons) in one command; Ctrl-C, SIGTERM and SIGHUP stop them all."""

from __future__ import annotations

import argparse
import contextlib
import logging
import shutil
import signal
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from asynqpy import demo as demo_app
from asynqpy.activity import Activity
from asynqpy.connection import connect
from asynqpy.devstate import StateDir, StateDirBusy
from asynqpy.embedded import EmbeddedServer, answers, free_port, port_is_free, stop_orphan
from asynqpy.errors import AsynqError, UsageError
from asynqpy.plugins import DevContext, dev_addons
from asynqpy.rdb.syncdoor import SyncDoor
from asynqpy.server import Server
from asynqpy.terminal import say

log = logging.getLogger("asynqpy")

DEFAULT_PORT = 6379
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


@dataclass
class Redis:
    """The server dev works against, the banner's words about it, and (when reused) the process that owns it."""

    url: str
    about: str
    notes: list[str] = field(default_factory=list)
    owner: int | None = None


def run_dev(args: argparse.Namespace, stop: threading.Event | None = None) -> int:
    """Run until SIGINT/SIGTERM/SIGHUP (or `stop` is set), then stop everything it started. Returns the exit code:
    0, or 1 when the server it reused (another process's) stopped under it.

    args: the parsed `asynqpy dev` options (redis_url, port, rate, no_demo, redis_only, fresh and the add-ons').
    """
    stop = stop or threading.Event()
    state = StateDir(kind="redis" if args.redis_only else "dev")
    with _stop_on_signals(stop), contextlib.ExitStack() as cleanup:
        redis = _redis(args, state, cleanup)
        lines = ["", f"asynqpy {'redis' if args.redis_only else 'dev'} is running (Ctrl-C stops it)",
                 f"  Redis:     {redis.url}  ({redis.about})", *redis.notes, *_neighbour(state, args.redis_only)]
        activity: Activity | None = None
        if not args.redis_only:
            activity = Activity()
            mux = demo_app.build_mux()
            mux.use(activity.middleware)
            server = Server(redis.url, queues=demo_app.QUEUES, concurrency=20)
            server.start(mux)
            cleanup.callback(server.shutdown)
            lines.append(f"  Worker:    queues {demo_app.QUEUES}, concurrency 20, demo handlers from asynqpy.demo")
            if not args.no_demo:
                producer = threading.Thread(target=demo_app.produce, args=(redis.url, stop, args.rate), daemon=True)
                producer.start()
                cleanup.callback(producer.join, 5)
                cleanup.callback(stop.set)
                lines.append(f"  Producer:  about {args.rate:g} demo tasks a second: emails, reports, CRM syncs "
                             "and scheduled cleanups (one CRM sync in ten has an old producer's payload on "
                             "purpose: archived at once, PayloadMismatch)")
            lines += _start_addons(args, redis.url, state.path, cleanup)
        say("\n".join(lines + _how_to_use(args.redis_only) + [""]), flush=True)
        gone = _wait(stop, activity, getattr(args, "activity_every", 10.0), redis)
    if gone:
        log.error("%s; stopping too (run the command again to start a server of its own)", gone)
        return 1
    log.info("stopped")
    return 0


def _redis(args: argparse.Namespace, state: StateDir, cleanup: contextlib.ExitStack) -> Redis:
    """The server to use: --redis-url's, the running one of this directory and command, or a new embedded Valkey."""
    if args.redis_url:
        return Redis(args.redis_url, "given with --redis-url; not started or stopped by this command")
    command = f"asynqpy {state.kind}"
    try:
        state.lock()
    except StateDirBusy as busy:
        url = state.running_url()
        if url and _alive(busy.pid) and answers(url):
            if getattr(args, "fresh", False):
                raise UsageError(f"--fresh: the server of process {busy.pid} ({command}, {state.path}) runs; stop "
                                 "it first") from None
            return Redis(url, f"reused: the server of `{command}` in process {busy.pid}, data in {state.data_dir}; "
                              f"left running; for a clean one stop that process, then `{command} --fresh`",
                         owner=busy.pid)
        raise UsageError(f"{state.path} is locked by process {busy.pid or '?'}, whose server does not answer "
                         "(still starting?): stop that process or wait") from None
    cleanup.callback(state.unlock)
    orphan = stop_orphan(state.data_dir)
    notes = [f"  Note:      stopped valkey-server {orphan}, left running on {state.data_dir} by an earlier run"] \
        if orphan else []
    if state.legacy_data_dir.is_dir():
        notes.append(f"  Note:      {state.legacy_data_dir} holds an older asynqpy's data and is not used: "
                     "remove it")
    if getattr(args, "fresh", False) and state.data_dir.exists():
        shutil.rmtree(state.data_dir)
    port = args.port
    if port and not port_is_free(port):
        raise UsageError(f"port {port} is in use (another Redis?): choose another with --port, or --port 0 for any")
    if port is None:
        port = DEFAULT_PORT if port_is_free(DEFAULT_PORT) else free_port()
        if port != DEFAULT_PORT:
            other = StateDir(state.root.parent, "redis" if state.kind == "dev" else "dev").live()
            whose = f"`asynqpy {other.kind}` of this directory has it" if other and f":{DEFAULT_PORT}/" in other.url \
                else "another Redis?"
            notes.append(f"  Note:      port {DEFAULT_PORT} is taken ({whose}), so this one is on {port}; "
                         "commands started below this directory find it anyway")
    embedded = EmbeddedServer(port=port or None, data_dir=state.data_dir).start()
    cleanup.callback(embedded.stop)
    state.publish(embedded.url)
    cleanup.callback(state.withdraw)
    kept = _key_count(embedded.url)
    data = f"data kept in {embedded.data_dir}" + (f", {kept} keys from earlier runs; `{command} --fresh` starts "
                                                  "empty" if kept else "")
    return Redis(embedded.url, f"started: embedded Valkey, {data}", notes)


def _key_count(url: str) -> int:
    """How many keys the server just started with (what earlier runs kept)."""
    door = SyncDoor(connect(url), url)
    try:
        return int(door.command("DBSIZE"))
    finally:
        door.close()


def _neighbour(state: StateDir, redis_only: bool) -> list[str]:
    """What the banner says about the other command's server in this directory (they never share one)."""
    other = StateDir(state.root.parent, "dev" if redis_only else "redis").live()
    if other is None:
        return []
    if redis_only:
        return [f"  Note:      `asynqpy dev` of this directory runs its own server, {other.url}, with its demo "
                "worker; it never sees this one's tasks. Commands here find this one; --redis-url reaches the demo's"]
    return [f"  Note:      `asynqpy redis` of this directory runs at {other.url}; commands here find that one "
            f"first: add --redis-url to reach this one"]


def _alive(pid: int) -> bool:
    """True when pid is a live process (not a zombie)."""
    if pid <= 0:
        return False
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rpartition(")")[2].split()[0] != "Z"


def _start_addons(args: argparse.Namespace, url: str, state_dir: Path, cleanup: contextlib.ExitStack) -> list[str]:
    """Start each installed dev add-on; its banner lines, or a line saying why it did not start."""
    lines: list[str] = []
    for addon in dev_addons():
        try:
            running = addon.start(DevContext(redis_url=url, state_dir=state_dir, args=args))
        except Exception as exc:  # dev goes on without it, and says so
            # an add-on's own error says what to do; anything else is a bug worth its traceback
            log.warning("dev add-on %s did not start: %s", addon.name, exc, exc_info=not isinstance(exc, AsynqError))
            lines.append(f"  {addon.name}: did not start: {exc}")
            continue
        cleanup.callback(running.stop)
        lines += [f"  {line}" for line in running.banner]
    return lines


def _how_to_use(redis_only: bool) -> list[str]:
    """How to reach the `asynqpy` command from another terminal, and commands to try."""
    lines = []
    exe = Path(sys.prefix) / "bin" / "asynqpy"
    if sys.prefix != sys.base_prefix and shutil.which("asynqpy") != str(exe):
        activate = Path(sys.prefix) / "bin" / "activate"
        with contextlib.suppress(ValueError):
            activate = activate.relative_to(Path.cwd())
        lines.append(f"  CLI:       in another terminal, first: source {activate}   (puts `asynqpy` on PATH)")
    lines.append("  Try:       asynqpy stats")
    if redis_only:
        lines.append("             asynqpy worker app.tasks:mux --queues critical=6,default=3,low=1")
    else:
        lines += ["             asynqpy task ls default --state archived",
                  "             asynqpy server ls"]
    return lines


@contextlib.contextmanager
def _stop_on_signals(stop: threading.Event) -> Any:
    """SIGINT, SIGTERM and SIGHUP (the terminal closed) set stop, so cleanup runs; the old handlers come back after."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def on_signal(signum: int, _frame: Any) -> None:
        log.info("%s received: stopping", signal.Signals(signum).name)
        stop.set()

    old = {s: signal.signal(s, on_signal) for s in STOP_SIGNALS}
    try:
        yield
    finally:
        for s, handler in old.items():
            signal.signal(s, handler)


def _wait(stop: threading.Event, activity: Activity | None, every: float, redis: Redis) -> str:
    """Wait for stop, logging activity. Returns "" or, when the reused server's owner or server went away, why."""
    last = last_check = time.monotonic()
    while not stop.wait(min(0.5, every)):
        now = time.monotonic()
        if activity is not None and now - last >= every:
            log.info("%s", Activity.line(activity.take(), now - last))
            last = now
        if redis.owner is not None and now - last_check >= 1.0:
            last_check = now
            if not _alive(redis.owner):
                return f"process {redis.owner}, whose server at {redis.url} this one reused, stopped"
            if not answers(redis.url):
                return f"the server at {redis.url} (of process {redis.owner}) does not answer PING"
    return ""
