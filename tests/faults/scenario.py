"""One fault against every component at once: probers call each component over and over while the fault lasts
and until it answers again, then the tasks are drained and counted. The Outcome is what the tests assert on."""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

import redis

from asynqpy import Client, Task
from asynqpy.errors import AsynqError
from inspector import Inspector
from tests.faults.app import RUNS, WORK
from tests.faults.faults import Fault, Target
from tests.faults.probes import AsyncClientThread, Prober
from tests.faults.probes import probers as make_probers
from tests.faults.rig import QUEUE, SPARE, Rig, http_get

RECOVERY_MAX = 20.0  # probing goes on this long after the fault at most, waiting for a success
BEFORE = 40          # tasks of 200 ms enqueued just before the fault: some in flight, the rest pending
AFTER = 10           # tasks enqueued (directly) right after the fault
LEASE = 30.0         # the worker's lease_duration (the default)


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


def _excerpt(output: str) -> str:
    """A process's last traceback (the one a failure message needs; access log lines would bury it), then the
    end of its output."""
    at = output.rfind("Traceback (most recent call last)")
    first = output[at:at + 2500] + "\n...\n" if at >= 0 else ""
    return first + output[-1500:]


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
    client, aclient, insp = Client(rig.url), AsyncClientThread(rig.url), Inspector(rig.url)
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
        probers = make_probers(rig, client, aclient, insp, acked, lock)
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
