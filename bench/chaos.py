"""Chaos at scale (a script, not a test): tasks through several `asynqpy worker` processes, one SIGKILLed every few
seconds, Redis SIGKILLed and restarted on its append-only file (appendfsync always), a BUSY storm and a Toxiproxy
partition in the middle, Go producers and a Go consumer (the interop peer, real hibiken/asynq) mixed in. Prints
tasks lost (must be 0), tasks run more than once (in-flight ones only: a worker killed after its handler ran,
a reply lost in a fault), tasks stuck active at the end (must be 0) and the time to drain.

    python bench/chaos.py                       # 100,000 tasks, 4 workers, the defaults below
    python bench/chaos.py --tasks 20000 --no-go --json bench/results/chaos.json

Every server is private (started here, on free loopback ports): the broker, behind Toxiproxy, and a ledger server
no fault touches where every finished run is counted (bench/chaos_app.py; the Go worker's runs are read from its
output). Needs the Go toolchain for Toxiproxy and the Go peer (both built once into ~/.cache/asynqpy-go);
without it, --partition 0 --no-go run the rest.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path

import redis

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from asynqpy import Client, Task  # noqa: E402
from asynqpy.embedded import EmbeddedServer  # noqa: E402
from asynqpy.errors import AsynqError  # noqa: E402
from bench.chaos_app import RUNS, TYPE  # noqa: E402
from inspector import Inspector  # noqa: E402
from tests.faults.faults import SPIN  # noqa: E402
from tests.faults.toxiproxy import Proxy, Toxiproxy  # noqa: E402
from tests.faults.toxiproxy import build as build_toxiproxy  # noqa: E402
from tests.interop import goasynq  # noqa: E402

QUEUE = "chaos"
CHUNK = 500
STARTED = re.compile(r" INFO asynqpy: server \S+ started: pid ")
# What `asynqpy worker` prints when it refuses to start (asynqpy/clicommon.py, exit 1): Redis cannot be reached, or
# answers "not now" (LOADING, BUSY, ...). Go asynq's Server.Start refuses the same way.
REFUSAL = re.compile(r"^asynqpy: (?:cannot reach Redis at \S+: (?P<reason>.*?)|Redis at \S+ answers (?P<kind>[A-Z]+) "
                     r"\(transient\).*?)(?: \(the URL was [^()]*\))?$")
NOT_TRANSIENT = re.compile(r"auth|password|WRONGPASS|NOAUTH|NOPERM", re.IGNORECASE)


def refusal(log: str) -> str | None:
    """Why a worker refused to start, from its log: "LOADING", "BUSY", "connection refused", "connection closed",
    "timeout", ...; None when the log does not show a refusal on transient Redis trouble (it said "started", or it
    ended some other way: a traceback, an auth error, nothing at all)."""
    lines = [line for line in log.splitlines() if line.strip()]
    if not lines or any(STARTED.search(line) for line in lines):
        return None
    m = REFUSAL.match(lines[-1].strip())
    if m is None:
        return None
    if m["kind"]:
        return m["kind"]
    reason = m["reason"] or ""
    if NOT_TRANSIENT.search(reason):
        return None
    low = reason.lower()
    for words, name in ((("refused",), "connection refused"), (("closed", "reset", "broken pipe"), "connection closed"),
                        (("timeout", "timed out"), "timeout")):
        if any(w in low for w in words):
            return name
    return "cannot reach: " + reason[:60]


@dataclass
class Figures:
    """What one run measured (printed, and written as JSON with --json)."""

    tasks_acknowledged: int = 0
    by_go: int = 0
    lost: int = 0
    run_twice: int = 0
    runs_by_go: int = 0
    stuck_active: int = 0
    left_in_queue: int = 0
    archived: int = 0
    enqueue_errors: int = 0
    kills: int = 0
    worker_exits: int = 0  # workers that exited on their own (replaced, as an orchestrator would): the two below
    refused_start: int = 0  # exited before "started", their log naming transient Redis trouble (as Go's Start does)
    refused_reasons: dict[str, int] = field(default_factory=dict)  # "LOADING", "BUSY", "connection refused", ...
    exited_running: int = 0  # every other exit (after "started", a traceback, no reason): a bug, must be 0
    exits: list[dict[str, object]] = field(default_factory=list)  # one per exit: pid, log, returncode, kind, last line
    go_worker_exit: int | None = None  # the Go worker's exit code if it exited by itself (not restarted)
    redis_restarts: int = 0
    busy_seconds: float = 0.0
    partition_seconds: float = 0.0
    produce_seconds: float = 0.0
    drain_seconds: float = 0.0
    total_seconds: float = 0.0
    drained: bool = False
    events: list[str] = field(default_factory=list)


class Run:
    """The servers, processes and counters of one chaos run."""

    def __init__(self, args: argparse.Namespace, work: Path) -> None:
        self.args, self.work = args, work
        self.figures = Figures()
        self.t0 = time.monotonic()
        self.lock = threading.Lock()
        self.acked: set[str] = set()
        self.go_runs: Counter[str] = Counter()
        self.produced_done = threading.Event()
        self.stop = threading.Event()
        (work / "logs").mkdir(parents=True, exist_ok=True)
        self.ledger_server = EmbeddedServer().start()
        self.ledger = redis.Redis.from_url(self.ledger_server.url)
        self.broker = EmbeddedServer(data_dir=work / "broker", extra_args=["--appendfsync", "always"]).start()
        self.proxy: Proxy | None = None
        self.toxiproxy: Toxiproxy | None = None
        if args.partition > 0:
            self.toxiproxy = Toxiproxy(build_toxiproxy(), work / "logs")
            self.proxy = self.toxiproxy.proxy("chaos", self.broker.port)
        self.url = self.proxy.url() if self.proxy else self.broker.url
        self.go: goasynq.GoPeer | None = goasynq.GoPeer(goasynq.build(), self.url) if args.go else None
        self.workers: list[subprocess.Popen[bytes]] = []
        self.killed: set[int] = set()
        self.replaced: set[int] = set()
        self.go_worker: subprocess.Popen[str] | None = None

    def note(self, what: str) -> None:
        line = f"{time.monotonic() - self.t0:7.1f}s  {what}"
        self.figures.events.append(line)
        print(line, flush=True)

    # processes -------------------------------------------------------------------------------------------
    def start_worker(self) -> subprocess.Popen[bytes]:
        n = len(self.workers)
        log = open(self.work / "logs" / f"worker-{n}.log", "ab")  # noqa: SIM115 - handed to the child
        env = {**os.environ, "CHAOS_LEDGER_URL": self.ledger_server.url,
               "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
        env.pop("REDIS_URL", None)
        proc = subprocess.Popen(
            [sys.executable, "-m", "asynqpy.cli", "worker", "bench.chaos_app:mux", "--redis-url", self.url,
             "--queues", f"{QUEUE}=1", "--concurrency", str(self.args.concurrency), "--shutdown-timeout", "2"],
            cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        log.close()
        self.workers.append(proc)
        return proc

    def start_go_worker(self) -> None:
        assert self.go is not None
        argv = [str(self.go.binary), "work", *goasynq.redis_args(self.url), "--queues", f"{QUEUE}=1",
                "--concurrency", "4", "--duration", "24h", "--retry-delay-s", "1"]
        self.go_worker = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=open(  # noqa: SIM115
            self.work / "logs" / "go-worker.log", "ab"), text=True, start_new_session=True)

        def read() -> None:
            assert self.go_worker is not None and self.go_worker.stdout is not None
            for line in self.go_worker.stdout:
                with contextlib.suppress(ValueError, KeyError):
                    tid = json.loads(line)["id"]
                    with self.lock:
                        self.go_runs[tid] += 1
        threading.Thread(target=read, daemon=True).start()

    def alive_workers(self) -> list[subprocess.Popen[bytes]]:
        return [p for p in self.workers if p.poll() is None]

    # producers -------------------------------------------------------------------------------------------
    def produce_python(self, count: int) -> None:
        """count tasks in chunks, paced to --rate; a chunk that meets trouble is tried again (new tasks)."""
        client = Client(self.url)
        per_chunk = CHUNK / max(1.0, self.args.rate * (1 - self.args.go_share))
        done = 0
        next_at = time.monotonic()
        while done < count and not self.stop.is_set():
            n = min(CHUNK, count - done)
            try:
                out = client.enqueue_many([Task(TYPE, b"") for _ in range(n)], queue=QUEUE)
            except AsynqError:
                self.figures.enqueue_errors += 1
                time.sleep(0.2)
                continue
            ok = [r.id for r in out if not isinstance(r, Exception)]
            with self.lock:
                self.acked.update(ok)
            self.figures.enqueue_errors += n - len(ok)
            done += len(ok)
            next_at += per_chunk
            time.sleep(max(0.0, next_at - time.monotonic()))
        client.close()

    def produce_go(self, count: int) -> None:
        """count tasks through the Go client, 1,000 per goapp run; errors are tried again."""
        assert self.go is not None
        done = 0
        while done < count and not self.stop.is_set():
            n = min(1000, count - done)
            try:
                out = self.go.enqueue([{"type": TYPE, "queue": QUEUE, "payload_b64": ""}] * n)
            except (goasynq.GoPeerError, subprocess.TimeoutExpired):
                self.figures.enqueue_errors += 1
                time.sleep(0.5)
                continue
            ok = [o["id"] for o in out if o.get("event") == "enqueued"]
            with self.lock:
                self.acked.update(ok)
                self.figures.by_go += len(ok)
            self.figures.enqueue_errors += n - len(ok)
            done += len(ok)
            time.sleep(n / max(1.0, self.args.rate * self.args.go_share))

    def produced(self) -> int:
        with self.lock:
            return len(self.acked)

    # faults ----------------------------------------------------------------------------------------------
    def log_of(self, proc: subprocess.Popen[bytes]) -> tuple[str, str]:
        name = f"logs/worker-{self.workers.index(proc)}.log"
        return name, (self.work / name).read_text(errors="replace")

    def kill_one(self) -> None:
        alive = self.alive_workers()
        if alive:
            victim = random.choice(alive)
            victim.send_signal(signal.SIGKILL)
            victim.wait()
            if victim.returncode != -signal.SIGKILL or refusal(self.log_of(victim)[1]) is not None:
                return  # it had exited, or was exiting, by itself (a refusal written): replace_exited counts it
            self.killed.add(victim.pid)
            self.figures.kills += 1
        self.start_worker()

    def replace_exited(self, replace: bool = True) -> None:
        """A worker that exited by itself is counted (a refusal to start or an exit while running, from its log),
        its log named, and another started in its place (unless replace is False: the run is over)."""
        f = self.figures
        if self.go_worker is not None and f.go_worker_exit is None and self.go_worker.poll() is not None \
                and not self.stop.is_set():
            f.go_worker_exit = self.go_worker.returncode
            self.note(f"the Go worker exited by itself ({f.go_worker_exit}; see logs/go-worker.log)")
        for p in self.workers:
            if p.poll() is not None and p.pid not in self.killed and p.pid not in self.replaced:
                self.replaced.add(p.pid)
                name, log = self.log_of(p)
                why = refusal(log) if p.returncode in (1, -signal.SIGKILL) else None  # -9: refused, then killed
                last = next((line for line in reversed(log.splitlines()) if line.strip()), "")
                f.worker_exits += 1
                f.exits.append({"pid": p.pid, "log": name, "returncode": p.returncode,
                                "kind": "refused to start" if why else "exited while running", "reason": why,
                                "last_line": last[:300], "at": round(time.monotonic() - self.t0, 1)})
                if why:
                    f.refused_start += 1
                    f.refused_reasons[why] = f.refused_reasons.get(why, 0) + 1
                    self.note(f"worker {p.pid} refused to start ({why}; {name})")
                else:
                    f.exited_running += 1
                    self.note(f"worker {p.pid} EXITED WHILE RUNNING ({p.returncode}; see {name})")
                if replace:
                    self.start_worker()

    def restart_redis(self) -> None:
        self.note("Redis: SIGKILL and restart on its append-only file")
        assert self.broker.proc is not None
        self.broker.proc.kill()
        self.broker.proc.wait()
        self.broker.proc = None
        self.broker.start(timeout=120)
        self.figures.redis_restarts += 1
        self.note("Redis: back")

    def busy_storm(self) -> None:
        seconds = self.args.busy_storm
        self.note(f"BUSY storm: scripts spinning {seconds:.0f} s with busy-reply-threshold 100 ms")
        admin = redis.Redis.from_url(self.broker.url, socket_timeout=seconds + 60)
        before = str(admin.config_get("busy-reply-threshold")["busy-reply-threshold"])
        admin.config_set("busy-reply-threshold", 100)
        t = time.monotonic()
        try:
            while time.monotonic() - t < seconds:
                admin.eval(SPIN, 0, 1_000_000)  # 1 s each: BUSY to everyone else meanwhile
        finally:
            admin.config_set("busy-reply-threshold", before)
            admin.close()
        self.figures.busy_seconds = time.monotonic() - t
        self.note("BUSY storm: over")

    def partition(self) -> None:
        assert self.proxy is not None
        seconds = self.args.partition
        self.note(f"partition: Toxiproxy blackholes both directions for {seconds:.0f} s")
        t = time.monotonic()
        with self.proxy.toxic("timeout", "downstream", timeout=0), self.proxy.toxic("timeout", "upstream", timeout=0):
            time.sleep(seconds)
        self.figures.partition_seconds = time.monotonic() - t
        self.note("partition: healed")

    def chaos(self) -> None:
        """Kills every --kill-every seconds until production ends; the other faults when production reaches their
        share of --tasks (restarts spread over it, the BUSY storm and the partition in the middle)."""
        total = self.args.tasks
        plan: list[tuple[float, str]] = [((i + 1) / (self.args.redis_restarts + 1) * 0.9, "restart")
                                         for i in range(self.args.redis_restarts)]
        if self.args.busy_storm > 0:
            plan.append((0.4, "busy"))
        if self.args.partition > 0:
            plan.append((0.55, "partition"))
        plan.sort()
        last_kill = time.monotonic()
        while not self.produced_done.is_set() and not self.stop.is_set():
            if plan and self.produced() >= plan[0][0] * total:
                _, what = plan.pop(0)
                {"restart": self.restart_redis, "busy": self.busy_storm, "partition": self.partition}[what]()
            self.replace_exited()
            if self.args.kill_every > 0 and time.monotonic() - last_kill >= self.args.kill_every:
                self.kill_one()
                last_kill = time.monotonic()
            time.sleep(0.1)
        for _, what in plan:  # production ended before their turn (a small run): still done, once each
            {"restart": self.restart_redis, "busy": self.busy_storm, "partition": self.partition}[what]()

    # counting --------------------------------------------------------------------------------------------
    def runs(self) -> Counter[str]:
        out: Counter[str] = Counter()
        for tid, n in self.ledger.hgetall(RUNS).items():
            out[tid.decode() if isinstance(tid, bytes) else tid] += int(n)
        with self.lock:
            out.update(self.go_runs)
        return out

    def main(self) -> Figures:
        f = self.figures
        for _ in range(self.args.processes):
            self.start_worker()
        if self.go:
            self.start_go_worker()
        go_count = int(self.args.tasks * self.args.go_share) if self.go else 0
        producers = [threading.Thread(target=self.produce_python, args=(self.args.tasks - go_count,), daemon=True)]
        if go_count:
            producers.append(threading.Thread(target=self.produce_go, args=(go_count,), daemon=True))
        self.note(f"{self.args.tasks} tasks, {self.args.processes} workers x {self.args.concurrency}"
                  f"{' + a Go worker x 4, ' + str(go_count) + ' by the Go client' if self.go else ''}")
        for p in producers:
            p.start()
        chaos = threading.Thread(target=self.chaos, daemon=True)
        chaos.start()
        check = Inspector(self.broker.url)
        last = 0.0
        while any(p.is_alive() for p in producers):
            time.sleep(0.5)
            if time.monotonic() - last > 5:
                last = time.monotonic()
                self.note(f"produced {self.produced()}, ran {len(self.runs())}, workers {len(self.alive_workers())}")
        f.produce_seconds = time.monotonic() - self.t0
        self.produced_done.set()
        chaos.join()
        self.note("production over; draining")
        drain_start = time.monotonic()
        while time.monotonic() - drain_start < self.args.drain_timeout:
            time.sleep(1)
            self.replace_exited()
            with contextlib.suppress(AsynqError):
                info = check.queue_info(QUEUE)
                left = info.pending + info.active + info.scheduled + info.retry
                ran = self.runs()
                missing = sum(1 for t in self.acked if t not in ran)
                if time.monotonic() - last > 5:
                    last = time.monotonic()
                    self.note(f"draining: {missing} not run yet, {left} in the queue "
                              f"(active {info.active}, retry {info.retry})")
                if missing == 0 and left == 0:
                    f.drained = True
                    break
        f.drain_seconds = time.monotonic() - drain_start
        f.total_seconds = time.monotonic() - self.t0
        info = check.queue_info(QUEUE)
        ran = self.runs()
        f.tasks_acknowledged = len(self.acked)
        f.lost = sum(1 for t in self.acked if t not in ran)
        f.run_twice = sum(1 for t, n in ran.items() if n > 1)
        f.runs_by_go = sum(self.go_runs.values())
        f.stuck_active = info.active
        f.left_in_queue = info.pending + info.scheduled + info.retry
        f.archived = info.archived
        check.close()
        self.replace_exited(replace=False)  # a worker that exited in the last second is still counted
        return f

    def close(self) -> None:
        self.stop.set()
        procs: list[subprocess.Popen[bytes] | subprocess.Popen[str]] = [*self.workers]
        if self.go_worker:
            procs.append(self.go_worker)
        for p in procs:
            if p.poll() is None:
                p.terminate()
        for p in procs:
            try:
                p.wait(10)
            except subprocess.TimeoutExpired:
                p.kill()
        if self.toxiproxy:
            self.toxiproxy.stop()
        self.broker.stop()
        self.ledger.close()
        self.ledger_server.stop()


def failures(f: Figures) -> list[str]:
    """Why the run failed (empty: it passed). A refusal to start is not a failure: the worker was replaced."""
    out = []
    if f.lost:
        out.append(f"{f.lost} tasks lost")
    if f.stuck_active:
        out.append(f"{f.stuck_active} tasks stuck active")
    if not f.drained:
        out.append("the drain did not finish")
    if f.exited_running:
        out.append(f"{f.exited_running} workers exited while running")
    return out


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--tasks", type=int, default=100_000, help="tasks enqueued in all (default 100000)")
    p.add_argument("--processes", type=int, default=4, help="Python worker processes (default 4)")
    p.add_argument("--concurrency", type=int, default=10, help="tasks at once per worker process (default 10)")
    p.add_argument("--kill-every", type=float, default=5.0,
                   help="SIGKILL one worker (and start another) every this many seconds while producing (5; 0: never)")
    p.add_argument("--redis-restarts", type=int, default=2, help="Redis SIGKILLs and restarts (default 2)")
    p.add_argument("--busy-storm", type=float, default=5.0, help="seconds of BUSY in the middle (default 5; 0: none)")
    p.add_argument("--partition", type=float, default=10.0,
                   help="seconds of a Toxiproxy blackhole in the middle (default 10; 0: none, and no proxy)")
    p.add_argument("--go", action=argparse.BooleanOptionalAction, default=True,
                   help="mix in the Go interop peer: a Go worker, and --go-share of the tasks by the Go client")
    p.add_argument("--go-share", type=float, default=0.1, help="share of the tasks the Go client enqueues (0.1)")
    p.add_argument("--rate", type=float, default=1000.0, help="tasks enqueued per second (default 1000)")
    p.add_argument("--drain-timeout", type=float, default=900.0, help="give up draining after this (default 900 s)")
    p.add_argument("--workdir", help="keep logs and the broker's data here (default: a temporary folder)")
    p.add_argument("--json", help="also write the figures as JSON to this file")
    args = p.parse_args(argv)
    if args.tasks < 1 or args.processes < 1 or not 0 <= args.go_share <= 1:
        p.error("--tasks and --processes must be at least 1, --go-share between 0 and 1")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    if args.workdir:
        work = Path(args.workdir)
        work.mkdir(parents=True, exist_ok=True)
    else:
        work = Path(tempfile.mkdtemp(prefix="asynqpy-chaos-"))
    try:
        run = Run(args, work)
    except (goasynq.GoPeerUnavailable, RuntimeError) as exc:
        print(f"chaos: cannot start: {exc} (logs in {work})", file=sys.stderr)
        return 2
    try:
        f = run.main()
    except BaseException:
        print(f"chaos: the run failed; its logs and the broker's data are kept in {work}", file=sys.stderr)
        raise
    finally:
        run.close()
    print()
    print(f"tasks acknowledged   {f.tasks_acknowledged} ({f.by_go} by the Go client; {f.runs_by_go} runs by the Go "
          f"worker)")
    print(f"tasks lost           {f.lost}")
    print(f"run more than once   {f.run_twice}")
    print(f"stuck active at end  {f.stuck_active}")
    print(f"left in the queue    {f.left_in_queue} (archived {f.archived})")
    reasons = ", ".join(f"{why} {n}" for why, n in sorted(f.refused_reasons.items())) or "-"
    print(f"refused to start     {f.refused_start} (replaced; {reasons})")
    print(f"exited while running {f.exited_running}" + "".join(
        f"\n    {e['log']} (exit {e['returncode']}): {e['last_line']}" for e in f.exits
        if e["kind"] == "exited while running"))
    if f.go_worker_exit is not None:
        print(f"Go worker            exited by itself ({f.go_worker_exit}; not restarted)")
    print(f"faults               {f.kills} worker SIGKILLs, {f.redis_restarts} Redis restarts, "
          f"{f.busy_seconds:.1f} s BUSY, {f.partition_seconds:.1f} s partition; {f.enqueue_errors} enqueue errors "
          f"retried")
    print(f"time                 produced in {f.produce_seconds:.1f} s, drained {f.drain_seconds:.1f} s after "
          f"({'done' if f.drained else 'NOT drained'}), {f.total_seconds:.1f} s in all")
    failed = failures(f)
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps({"args": vars(args), "failures": failed,
                                               "workdir": str(work) if failed or args.workdir else None,
                                               **asdict(f)}, indent=2))
    if failed:
        print(f"FAIL: {'; '.join(failed)}. Logs and the broker's data: {work}")
        return 1
    print("PASS")
    if not args.workdir:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
