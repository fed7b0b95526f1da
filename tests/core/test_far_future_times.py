"""Times past what a datetime holds. A producer cannot ask for a due time, timeout, lock or retention past asynq's
longest duration (Go's, about 292 years): it gets an InvalidArgumentError and nothing is written. A reader meets
such times anyway (a Go producer's ProcessAt in year 275817 is a valid Go time; a hand-written score may be
+inf) and shows them as datetime's last moment instead of failing the whole listing."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
import redis

from asynqpy import Client, Task
from asynqpy.errors import InvalidArgumentError
from asynqpy.options import MAX_DURATION_S
from asynqpy.rdb import keys
from asynqpy.unixtime import EARLIEST, LATEST, utc_from_unix
from inspector import Inspector

GO_YEAR_275817 = 8_641_796_445_975  # Unix seconds of a due time Go writes without complaint


@pytest.mark.parametrize("option", ["process_in", "timeout", "unique", "retention"])
def test_a_duration_past_asynqs_longest_is_refused_and_nothing_is_written(redis_url: str, r: redis.Redis,
                                                                       option: str) -> None:
    with Client(redis_url) as c:
        for too_long in (MAX_DURATION_S + 1, timedelta(days=99_999_999), 1e300, 10**400):
            with pytest.raises(InvalidArgumentError) as e:
                c.enqueue(Task("far", b""), queue="far", **{option: too_long})
            assert e.value.argument == option and "292 years" in str(e.value) and len(str(e.value)) < 200
        assert not r.exists(keys.scheduled("far"), keys.pending("far"))
        # the longest one is fine
        info = c.enqueue(Task("far", b""), queue="far", **{option: MAX_DURATION_S})
    assert r.exists(keys.task("far", info.id))


def test_conversion_clamps_to_datetimes_range() -> None:
    assert utc_from_unix(GO_YEAR_275817) == LATEST
    assert utc_from_unix(float("inf")) == LATEST and utc_from_unix(float("-inf")) == EARLIEST
    assert utc_from_unix(-1e15) == EARLIEST
    assert utc_from_unix(1_700_000_000) == datetime(2023, 11, 14, 22, 13, 20, tzinfo=UTC)


def test_readers_survive_a_go_written_far_future_task(redis_url: str, r: redis.Redis) -> None:
    with Client(redis_url) as c:
        far = c.enqueue(Task("far", b""), queue="farread", process_in=3600).id
        inf = c.enqueue(Task("inf", b""), queue="farread", process_in=3600).id
        near = c.enqueue(Task("near", b""), queue="farread", process_in=60).id
    r.zadd(keys.scheduled("farread"), {far: GO_YEAR_275817, inf: float("inf")})
    r.hset(keys.task("farread", far), "pending_since", str(2**63 - 1))  # (Go's largest nanoseconds)
    insp = Inspector(connection=r)
    info = insp.queue_info("farread")
    assert info.scheduled == 3
    listed = {t.id: t.info for t in insp.list_tasks("farread", "scheduled").tasks}
    assert listed[far].next_process_at == LATEST and listed[inf].next_process_at == LATEST
    assert listed[near].next_process_at is not None and listed[near].next_process_at < LATEST
    assert insp.get_task("farread", far).info.next_process_at == LATEST
    assert len(insp.find("farread", "state:scheduled").tasks) == 3
    assert insp.explain("farread", far)
    assert insp.delete_all("farread", "scheduled") == 3
