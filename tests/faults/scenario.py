"""One fault against every component at once: probers call each component over and over while the fault lasts
and until it answers again, then the tasks are drained and counted. The Outcome is what the tests assert on."""

from __future__ import annotations

import asyncio
import contextlib
import re
import threading
import time
import traceback
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

import redis

from asynqpy import AsyncClient, Client, Task
from asynqpy.errors import AsynqError
from inspector import Inspector
from tests.core.procs import ROOT
from tests.core.procs import run as run_cli
from tests.faults.app import RUNS, WORK
from tests.faults.faults import Fault, Target
from tests.faults.rig import QUEUE, SPARE, Rig, http_get

RECOVERY_MAX = 20.0  # probing goes on this long after the fault at most, waiting for a success
BEFORE = 40          # tasks of 200 ms enqueued just before the fault: some in flight, the rest pending
AFTER = 10           # tasks enqueued (directly) right after the fault
LEASE = 30.0         # the worker's lease_duration (the default)


@dataclass(frozen=True)
class Call:
    """One call of a component: when it started (monotonic), how long it took, and its verdict: "ok",
    "ours: <our error>" (a clear failure: our error type, a banner, a one-line CLI message) or "theirs: ..."
    (anything else: a redis-py error, a traceback, a 500)."""

    start: float
    seconds: float
    verdict: str

    @property
    def end(self) -> float:
        return self.start + self.seconds


class Ours(Exception):
    """Raised by an op for a clear, expected failure the user can act on (a banner, a one-line CLI error)."""


@dataclass
class Prober:
    """Calls op in a loop until stopped; every call is kept."""

    name: str
    op: Callable[[], None]
    pause: float = 0.1
    calls: list[Call] = field(default_factory=list)

    def loop(self, stop: threading.Event, fault_end: list[float]) -> None:
        while not stop.is_set():
            t0 = time.monotonic()
            try:
                self.op()
                verdict = "ok"
            except (AsynqError, Ours) as exc:
                verdict = f"ours: {type(exc).__name__}: {exc}"
            except Exception as exc:
                verdict = f"theirs: {type(exc).__name__}: {exc}\n{traceback.format_exc(limit=4)}"
            self.calls.append(Call(t0, time.monotonic() - t0, verdict))
            if fault_end and self.recovered(fault_end[0]) is not None:
                return
            stop.wait(self.pause)

    def recovered(self, fault_end: float) -> float | None:
        """Seconds from the fault's end (or from the end of the call still running then) to the end of the first
        successful call started after it; None if there was none."""
        busy_until = max([c.end for c in self.calls if c.start < fault_end] + [fault_end])
        for c in self.calls:
            if c.start >= fault_end and c.verdict == "ok":
                return c.end - busy_until
        return None


@dataclass
class Outcome:
    """What happened to every component through one fault (times are time.monotonic())."""

    fault: Fault
    fault_start: float
    fault_end: float
    probers: dict[str, Prober]
    acked: set[str]                  # task ids whose enqueue returned
    runs: dict[str, list[tuple[float, float]]]  # task id -> (start, end) wall-clock of every run
    wall_offset: float               # time.time() - time.monotonic() during the run
    after: set[str]
    after_done_in: float | None      # seconds from the fault's end until every AFTER task had run
    active_left: int                 # tasks held active for good (their lease still renewed)
    orphans: set[str]                # active, their lease lapsing: the recoverer retries them (see run())
    cron_resumed_in: float | None    # seconds from the fault's end to the scheduler's first enqueue after it
    dead: dict[str, str]
    worker_pids_before: set[int]
    worker_pids_after: set[int]
    readyz: tuple[int, str]
    worker_log: str                  # the tail of the worker's output, for failure messages
    queue_state: str                 # the queue's counts at the end, for failure messages
    logs: dict[str, str]             # the tail of each process's output (worker, web, exporter, scheduler)

    def lost(self) -> set[str]:
        """Acknowledged tasks that never ran and will not (orphans will, once their lease lapses)."""
        return {t for t in self.acked if t not in self.runs and t not in self.orphans}

    def run_twice_outside_fault(self) -> dict[str, list[tuple[float, float]]]:
        """Tasks run more than once whose first run was not in flight during the fault (+-1 s)."""
        lo, hi = self.fault_start + self.wall_offset - 1, self.fault_end + self.wall_offset + 1
        return {t: r for t, r in self.runs.items() if len(r) > 1 and not (r[0][0] <= hi and r[0][1] >= lo)}


def _ledger_runs(ledger: redis.Redis) -> dict[str, list[tuple[float, float]]]:
    runs: dict[str, list[tuple[float, float]]] = {}
    for raw in ledger.lrange(RUNS, 0, -1):
        kind, tid, start, end = (raw.decode() if isinstance(raw, bytes) else raw).split()
        if kind == WORK:
            runs.setdefault(tid, []).append((float(start), float(end)))
    for r in runs.values():
        r.sort()
    return runs


class _AsyncClientThread:
    """An AsyncClient on an event loop of its own thread, so the prober can call it like the others."""

    def __init__(self, url: str) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.client: AsyncClient = self.call(self._make(url))

    @staticmethod
    async def _make(url: str) -> AsyncClient:
        return AsyncClient(url)

    def call(self, coro: object) -> AsyncClient:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result()  # type: ignore[arg-type]

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.call(self.client.close())
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(5)


def _excerpt(output: str) -> str:
    """A process's last traceback (the one a failure message needs; access log lines would bury it), then the
    end of its output."""
    at = output.rfind("Traceback (most recent call last)")
    first = output[at:at + 2500] + "\n...\n" if at >= 0 else ""
    return first + output[-1500:]


def _banner_shown(html: str) -> bool:
    """The page shows the Redis banner (it is always in the page, hidden while Redis answers)."""
    tag = re.search(r'<[^>]*id="redis-banner"[^>]*>', html)
    return tag is not None and not re.search(r"\shidden(?:[\s>=])", tag.group(0))


def _probers(rig: Rig, client: Client, aclient: _AsyncClientThread, insp: Inspector,
             acked: set[str], lock: threading.Lock) -> dict[str, Prober]:
    def enqueue() -> None:
        info = client.enqueue(Task(WORK, b"20"), queue=QUEUE)
        with lock:
            acked.add(info.id)

    def enqueue_async() -> None:
        info = aclient.call(aclient.client.enqueue(Task(WORK, b"20"), queue=QUEUE))
        with lock:
            acked.add(info.id)  # type: ignore[attr-defined]

    def inspect() -> None:
        insp.queue_info(QUEUE)
        insp.list_tasks(QUEUE, "pending", size=5)

    def cli() -> None:
        proc = run_cli("queue", "info", QUEUE, "--redis-url", rig.url, cwd=ROOT, timeout=60)
        if proc.returncode == 0:
            return
        lines = proc.stderr.strip().splitlines()
        if proc.returncode == 1 and len(lines) == 1 and "Traceback" not in proc.stderr:
            raise Ours(f"exit 1: {lines[0]}")
        raise AssertionError(f"exit {proc.returncode}: {proc.stderr[-1500:]}")

    def page() -> None:
        status, html = rig.browser.open("/")
        banner = _banner_shown(html)
        if status == 200 and not banner:
            return
        if status in (200, 503) and banner:
            raise Ours(f"{status} with the Redis banner")
        raise AssertionError(f"GET / answered {status}{' with' if banner else ' without'} the banner: {html[:300]}")

    flip = ["pause"]

    def action() -> None:
        status, html = rig.browser.post(f"/queues/{SPARE}/{flip[0]}", {"state": "pending"})
        if status == 200:
            flip[0] = "resume" if flip[0] == "pause" else "pause"
            return
        if status == 503 and "Redis" in html:  # htmx gets the banner's message as a partial
            raise Ours(f"{status}: Redis is unavailable")
        if status == 409:  # the last answer was lost: the queue is already in the state asked for
            flip[0] = "resume" if flip[0] == "pause" else "pause"
            raise Ours("409: already so")
        raise AssertionError(f"POST {flip[0]} answered {status}: {html[:300]}")

    def scrape(base: str) -> Callable[[], None]:
        def op() -> None:
            status, text = http_get(base + "/metrics")
            if status != 200:
                raise AssertionError(f"/metrics answered {status}: {text[:300]}")
            if "asynqpy_redis_up 0" in text:
                raise Ours("asynqpy_redis_up 0")
            if "asynqpy_redis_up 1" not in text:
                raise AssertionError(f"/metrics has no asynqpy_redis_up: {text[:300]}")
        return op

    return {
        "client": Prober("client", enqueue),
        "async_client": Prober("async_client", enqueue_async),
        "inspector": Prober("inspector", inspect),
        "cli": Prober("cli", cli, pause=0.3),
        "dashboard_page": Prober("dashboard_page", page, pause=0.2),
        "dashboard_action": Prober("dashboard_action", action, pause=0.2),
        "dashboard_metrics": Prober("dashboard_metrics", scrape(rig.web_base), pause=0.2),
        "exporter": Prober("exporter", scrape(rig.exporter_base), pause=0.2),
    }


def _counts(insp: Inspector) -> str:
    q = insp.queue_info(QUEUE)
    return (f"pending {q.pending}, active {q.active}, scheduled {q.scheduled}, retry {q.retry}, "
            f"archived {q.archived}, paused {q.paused}; servers {[(s.pid, s.status) for s in insp.servers()]}")


def _worker_pids(rig: Rig, insp: Inspector) -> set[int]:
    """The worker process's pid, if its server is in the servers list (it heartbeats): waits up to 5 s for it."""
    pid = rig.procs["worker"].p.pid
    _wait(lambda: pid in {s.pid for s in insp.servers()}, 5)
    return {s.pid for s in insp.servers() if s.pid == pid}


def _wait(cond: Callable[[], object], timeout: float) -> float | None:
    """Seconds until cond() is truthy, or None after timeout."""
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        with contextlib.suppress(redis.RedisError, AsynqError):
            if cond():
                return time.monotonic() - t0
        time.sleep(0.05)
    return None


def _enqueue(client: Client) -> str:
    """A task enqueued on the server directly, retried while the fault's last effects pass."""
    for _ in range(50):
        with contextlib.suppress(AsynqError):
            return client.enqueue(Task(WORK, b"1"), queue=QUEUE).id
        time.sleep(0.1)
    raise AssertionError("cannot enqueue directly 5 s after the fault")


def _heal(rig: Rig, direct: Client, ledger: redis.Redis) -> None:
    """Each fault starts from working components: a process that an earlier fault killed or broke (its worker
    no longer takes tasks, its page answers 500) is started again first, so one defect does not fail every later
    fault's tests too. The earlier fault's own tests have reported it."""
    for name in rig.dead():
        rig.restart(name)
    probe = _enqueue(direct)
    if _wait(lambda: probe in _ledger_runs(ledger), 5) is None:
        rig.restart("worker")
    if rig.browser.open("/")[0] != 200:
        rig.restart("web")


def run(rig: Rig, fault: Fault, target: Target, ledger: redis.Redis) -> Outcome:
    """Put the rig through one fault and count what happened."""
    direct = Client(rig.direct_url)
    check = Inspector(rig.direct_url)
    client, aclient, insp = Client(rig.url), _AsyncClientThread(rig.url), Inspector(rig.url)
    acked: set[str] = set()
    lock = threading.Lock()
    try:
        ledger.delete(RUNS)  # this fault's runs only
        direct.enqueue(Task(WORK, b"1"), queue=SPARE)  # the dashboard action's queue exists
        _heal(rig, direct, ledger)
        ledger.delete(RUNS)
        pids_before = {rig.procs["worker"].p.pid}
        for _ in range(BEFORE):
            acked.add(direct.enqueue(Task(WORK, b"200"), queue=QUEUE).id)  # before the fault: no retry needed
        probers = _probers(rig, client, aclient, insp, acked, lock)
        stop, fault_end_box = threading.Event(), list[float]()
        threads = [threading.Thread(target=p.loop, args=(stop, fault_end_box), daemon=True)
                   for p in probers.values()]
        time.sleep(0.3)  # some of BEFORE are running when the fault starts
        for t in threads:
            t.start()
        with fault.inject(target):
            fault_start = time.monotonic()
        fault_end = time.monotonic()
        fault_end_box.append(fault_end)
        after = {_enqueue(direct) for _ in range(AFTER)}
        waited = _wait(lambda: after <= set(_ledger_runs(ledger)), RECOVERY_MAX)
        after_done = None if waited is None else time.monotonic() - fault_end
        for t in threads:
            t.join(max(0.0, fault_end + RECOVERY_MAX - time.monotonic()))
        stop.set()
        for t in threads:
            t.join(30)
        acked |= after
        stuck = after_done is None  # the worker is not taking tasks: do not wait long for the rest

        def drained() -> bool:  # every acknowledged task ran, or is active (an orphan shows as one: below)
            missing = acked - set(_ledger_runs(ledger))
            return not missing or missing <= {t.info.id for t in check.list_tasks(QUEUE, "active", size=1000).tasks}
        _wait(drained, 3 if stuck else 20)

        wall_end = fault_end + time.time() - time.monotonic()

        def active() -> tuple[set[str], set[str]]:
            """This fault's tasks still active (one an earlier fault left is its tests' finding), split into those
            held for good (their lease renewed after the fault) and orphans: taken by a dequeue whose reply the
            fault swallowed, their lease set then and never renewed, so the recoverer will retry them once it
            lapses (at-least-once; Go asynq does the same)."""
            held: set[str] = set()
            orphans: set[str] = set()
            for t in check.list_tasks(QUEUE, "active", size=1000).tasks:
                if t.info.id in acked:
                    lapses = t.lease_expires_at.timestamp() if t.lease_expires_at else float("inf")
                    (orphans if lapses <= wall_end + LEASE + 1 else held).add(t.info.id)
            return held, orphans
        _wait(lambda: not any(active()), 3 if stuck else 10)
        held, orphans = active()
        active_left = len(held)

        def cron_after() -> float:
            """Seconds from the fault's end to the scheduler's first enqueue after it (0.0: none yet)."""
            times = [e.enqueued_at.timestamp() for entry in check.scheduler_entries()
                     for e in check.scheduler_history(entry.id, size=20) if e.enqueued_at is not None]
            return min((t - wall_end for t in times if t > wall_end), default=0.0)
        _wait(cron_after, RECOVERY_MAX)
        cron_in = cron_after() or None
        readyz = http_get(f"http://127.0.0.1:{rig.worker_metrics}/readyz")
        return Outcome(
            fault=fault, fault_start=fault_start, fault_end=fault_end, probers=probers, acked=set(acked),
            runs=_ledger_runs(ledger), wall_offset=time.time() - time.monotonic(), after=after,
            after_done_in=after_done, active_left=active_left, orphans=orphans,
            cron_resumed_in=cron_in,
            dead=rig.dead(), worker_pids_before=pids_before, worker_pids_after=_worker_pids(rig, check), readyz=readyz,
            worker_log=rig.procs["worker"].output[-4000:], queue_state=_counts(check),
            logs={name: _excerpt(p.output) for name, p in rig.procs.items()})
    finally:
        for c in (direct, client):
            c.close()
        check.close()
        insp.close()
        aclient.close()


def summary(calls: list[Call]) -> str:
    """The verdicts of a prober's calls, counted (for failure messages)."""
    return ", ".join(f"{n}x {v.splitlines()[0][:160]}" for v, n in Counter(c.verdict for c in calls).items())
