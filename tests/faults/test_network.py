"""Every component through network faults made by Toxiproxy in front of a private server: 200 ms latency, a
10 s blackhole, reset_peer and a bandwidth limit (see tests/faults/checks.py for what is asserted)."""

from __future__ import annotations

import pytest
import redis

from tests.faults.checks import *  # noqa: F403  (the component tests, each run here on `outcome`)
from tests.faults.faults import NETWORK, Fault, Target
from tests.faults.rig import Rig
from tests.faults.scenario import Outcome, run

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module", params=NETWORK, ids=[f.name for f in NETWORK])
def outcome(request: pytest.FixtureRequest, network_rig: Rig, network_target: Target, ledger: redis.Redis) -> Outcome:
    fault: Fault = request.param
    return run(network_rig, fault, network_target, ledger)
