"""Every component through network faults made by Toxiproxy in front of a private server: 200 ms latency, a
10 s blackhole, reset_peer and a bandwidth limit (see tests/faults/checks.py for what is asserted)."""

from __future__ import annotations

import pytest
import redis

from tests.faults.checks import (
    test_caller_fails_clearly_and_resumes,
    test_no_process_dies,
    test_scheduler_resumes,
    test_worker_leaves_none_active,
    test_worker_loses_no_task,
    test_worker_resumes_without_a_restart,
    test_worker_runs_none_twice_but_in_flight_ones,
)
from tests.faults.faults import NETWORK, Fault, Target
from tests.faults.rig import Rig
from tests.faults.scenario import Outcome, run

pytestmark = pytest.mark.slow

__all__ = ["test_caller_fails_clearly_and_resumes", "test_no_process_dies", "test_scheduler_resumes",
           "test_worker_leaves_none_active", "test_worker_loses_no_task", "test_worker_resumes_without_a_restart",
           "test_worker_runs_none_twice_but_in_flight_ones"]


@pytest.fixture(scope="module", params=NETWORK, ids=[f.name for f in NETWORK])
def outcome(request: pytest.FixtureRequest, network_rig: Rig, network_target: Target, ledger: redis.Redis) -> Outcome:
    fault: Fault = request.param
    return run(network_rig, fault, network_target, ledger)
