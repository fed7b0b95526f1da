"""Every component through every error reply a real server gives: BUSY, OOM, READONLY, LOADING, NOSCRIPT and
CLIENT KILL of every connection (see tests/faults/checks.py for what is asserted)."""

from __future__ import annotations

import pytest
import redis

from tests.faults.checks import *  # noqa: F403  (the component tests, each run here on `outcome`)
from tests.faults.faults import REPLIES, Fault, Target
from tests.faults.rig import Rig
from tests.faults.scenario import Outcome, run

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module", params=REPLIES, ids=[f.name for f in REPLIES])
def outcome(request: pytest.FixtureRequest, reply_rig: Rig, reply_target: Target, ledger: redis.Redis) -> Outcome:
    fault: Fault = request.param
    return run(reply_rig, fault, reply_target, ledger)
