"""The component tests every fault module imports: each asserts, for one component, what the fault suite
promises (README, "Faults survived") on the module's `outcome` fixture (one run of the rig through one fault).

- no process dies (or is restarted);
- a caller gets one of our errors (the RedisUnavailableError family / AsynqError, the dashboard's banner, a
  one-line CLI message), never redis-py's, a traceback or a 500, within CALL_BOUND seconds;
- work resumes without a restart within RESUME seconds of the fault's end (the worker and scheduler within
  RESUME_LOOPS: their loops back off);
- no task is lost, none stays active, none is run twice unless it was in flight during the fault.
"""

from __future__ import annotations

import pytest

from asynqpy.connection import CONNECT_TIMEOUT, SOCKET_TIMEOUT
from tests.faults.probes import summary
from tests.faults.scenario import Outcome

# A call started during the fault ends within its socket timeout plus a connect timeout (the blackhole: the
# command's reply never comes, then a reconnect may hang as long), plus slack for a loaded 2-core machine.
CALL_BOUND = SOCKET_TIMEOUT + CONNECT_TIMEOUT + 3
CLI_START = 5.0  # a Python process's start on a loaded machine
CLI_BOUND = CALL_BOUND + CLI_START
RESUME = 5.0
RESUME_LOOPS = 10.0
CALLERS = ("client", "async_client", "inspector", "cli", "dashboard_page", "dashboard_action",
           "dashboard_metrics", "exporter")
# What a fault module takes with `from tests.faults.checks import *`: pytest collects them there, on that module's
# `outcome` fixture.
__all__ = ["test_caller_fails_clearly_and_resumes", "test_no_process_dies", "test_scheduler_resumes",
           "test_worker_leaves_none_active", "test_worker_loses_no_task", "test_worker_resumes_without_a_restart",
           "test_worker_runs_none_twice_but_in_flight_ones"]


@pytest.mark.parametrize("component", CALLERS)
def test_caller_fails_clearly_and_resumes(outcome: Outcome, component: str) -> None:
    prober = outcome.probers[component]
    problems = []
    theirs = [c for c in prober.calls if c.verdict.startswith("theirs")]
    if theirs:
        problems.append(f"{len(theirs)} calls failed with something not ours; first:\n{theirs[0].verdict}")
    bound = CLI_BOUND if component == "cli" else CALL_BOUND
    slow = [c for c in prober.calls if c.seconds > bound]
    if slow:
        problems.append(f"{len(slow)} calls took longer than {bound}s (longest {max(c.seconds for c in slow):.1f}s)")
    resumed = prober.recovered(outcome.fault_end)
    limit = RESUME + (CLI_START if component == "cli" else 0)
    if resumed is None or resumed > limit:
        problems.append(f"no success within {limit}s of the fault's end (first after {resumed}s)")
    if component == "dashboard_page" and outcome.fault.refuses_reads and not any(
            c.verdict.startswith("ours") for c in prober.calls if c.start < outcome.fault_end):
        problems.append("the page never showed the Redis banner while Redis refused reads")
    process = {"dashboard_page": "web", "dashboard_action": "web", "dashboard_metrics": "web",
               "exporter": "exporter"}.get(component)
    log = f"\nits log:\n{outcome.logs[process]}" if process and theirs else ""
    assert not problems, f"{component} through {outcome.fault}: " + "; ".join(problems) + \
        f"\nall calls: {summary(prober.calls)}{log}"


def test_no_process_dies(outcome: Outcome) -> None:
    assert not outcome.dead, f"through {outcome.fault}: {outcome.dead}"
    assert outcome.worker_pids_after == outcome.worker_pids_before, \
        f"through {outcome.fault}: the worker process {outcome.worker_pids_before} no longer heartbeats:\n" \
        f"{outcome.worker_log}"


def test_worker_loses_no_task(outcome: Outcome) -> None:
    lost = outcome.lost()
    assert not lost, f"through {outcome.fault}: {len(lost)} of {len(outcome.acked)} acknowledged tasks never ran; " \
        f"the queue: {outcome.queue_state}; the worker's log:\n{outcome.worker_log}"


def test_worker_runs_none_twice_but_in_flight_ones(outcome: Outcome) -> None:
    twice = {t: r for t, r in outcome.run_twice_outside_fault().items() if t in outcome.acked}
    assert not twice, f"through {outcome.fault}: run twice, not in flight during the fault: {twice}"


def test_worker_leaves_none_active(outcome: Outcome) -> None:
    assert outcome.active_left == 0, f"through {outcome.fault}: {outcome.active_left} tasks still active; " \
        f"the queue: {outcome.queue_state}; the worker's log:\n{outcome.worker_log}"


def _loops_limit(outcome: Outcome) -> float:
    """RESUME_LOOPS, plus a socket timeout after a fault that swallows requests (the one sent just before it
    ended is answered by nothing: its loop sees the timeout, then tries again)."""
    return RESUME_LOOPS + (SOCKET_TIMEOUT if outcome.fault.swallows else 0)


def test_worker_resumes_without_a_restart(outcome: Outcome) -> None:
    assert outcome.after_done_in is not None and outcome.after_done_in <= _loops_limit(outcome), \
        f"through {outcome.fault}: tasks enqueued after the fault ran only after {outcome.after_done_in}s; " \
        f"the queue: {outcome.queue_state}; the worker's log:\n{outcome.worker_log}"
    status, body = outcome.readyz
    assert status == 200, f"the worker's /readyz after {outcome.fault}: {status} {body[:300]}"


def test_scheduler_resumes(outcome: Outcome) -> None:
    assert outcome.cron_resumed_in is not None and outcome.cron_resumed_in <= _loops_limit(outcome), \
        f"through {outcome.fault}: the scheduler's first enqueue after the fault came after " \
        f"{outcome.cron_resumed_in}s; its log:\n{outcome.logs['scheduler']}"
