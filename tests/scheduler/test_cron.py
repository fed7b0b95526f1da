"""Cron specs: parsing, next times (fake instants, no waiting), daylight saving in three zones, errors, and the
option strings Go's Inspector reads back."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest

from asynqpy import Task
from asynqpy.cron import Every, go_duration, parse, parse_go_duration
from asynqpy.errors import InvalidArgumentError
from asynqpy.scheduler.entries import encode_entry, make_entry, option_string
from asynqpy.wire import GO_ZERO_TIME_SECONDS, SchedulerEntry


def ticks(spec: str, start: str, n: int, location: str = "UTC") -> list[str]:
    """The next n firings after start (ISO), as ISO wall times with offsets in the spec's zone."""
    sched = parse(spec, location)
    tz = getattr(sched, "tz", ZoneInfo(location))
    t = datetime.fromisoformat(start).timestamp()
    out = []
    for _ in range(n):
        nxt = sched.next(t)
        assert nxt is not None and nxt > t
        out.append(datetime.fromtimestamp(nxt, tz).isoformat())
        t = nxt
    return out


def test_five_fields_with_ranges_steps_lists_and_names() -> None:
    assert ticks("*/15 9-10 * * MON-FRI", "2026-05-01T10:31:00+00:00", 3) == [
        "2026-05-01T10:45:00+00:00", "2026-05-04T09:00:00+00:00", "2026-05-04T09:15:00+00:00"]
    assert ticks("0 12 1,15 jan,Jul *", "2026-01-10T00:00:00+00:00", 3) == [
        "2026-01-15T12:00:00+00:00", "2026-07-01T12:00:00+00:00", "2026-07-15T12:00:00+00:00"]
    assert ticks("5/20 * * * *", "2026-01-01T00:00:00+00:00", 3) == [
        "2026-01-01T00:05:00+00:00", "2026-01-01T00:25:00+00:00", "2026-01-01T00:45:00+00:00"]
    # 7 is Sunday as well as 0; day-of-month OR day-of-week when both are restricted (Vixie cron).
    assert ticks("0 0 * * 7", "2026-03-02T00:00:00+00:00", 1) == ["2026-03-08T00:00:00+00:00"]
    assert ticks("0 0 13 * FRI", "2026-03-01T00:00:00+00:00", 3) == [
        "2026-03-06T00:00:00+00:00", "2026-03-13T00:00:00+00:00", "2026-03-20T00:00:00+00:00"]
    assert ticks("0 0 29 2 *", "2026-01-01T00:00:00+00:00", 2) == [
        "2028-02-29T00:00:00+00:00", "2032-02-29T00:00:00+00:00"]


@pytest.mark.parametrize(("spec", "first"), [
    ("@hourly", "2026-06-10T11:00:00+00:00"), ("@daily", "2026-06-11T00:00:00+00:00"),
    ("@midnight", "2026-06-11T00:00:00+00:00"), ("@weekly", "2026-06-14T00:00:00+00:00"),
    ("@monthly", "2026-07-01T00:00:00+00:00"), ("@yearly", "2027-01-01T00:00:00+00:00"),
    ("@annually", "2027-01-01T00:00:00+00:00"),
])
def test_descriptors(spec: str, first: str) -> None:
    assert ticks(spec, "2026-06-10T10:20:00+00:00", 1) == [first]


def test_every_is_aligned_to_the_epoch_so_replicas_agree() -> None:
    s = parse("@every 1h30m")
    assert isinstance(s, Every)
    assert s.interval == 5400
    for start in (0.0, 1_000_000.3, 1_796_110_344.9):
        n = s.next(start)
        assert n % 5400 == 0 and start < n <= start + 5400
    assert parse("@every 30s").next(1_000_000_015.0) == 1_000_000_020.0
    assert parse("@every 30s").prev(1_000_000_015.0) == 999_999_990.0
    assert parse("@every 500ms") == Every("@every 500ms", 1)  # as Go: at least a second


def test_cron_tz_prefix_and_location() -> None:
    assert ticks("CRON_TZ=Asia/Tokyo 0 9 * * *", "2026-06-10T00:30:00+00:00", 1) == ["2026-06-11T09:00:00+09:00"]
    assert ticks("0 9 * * *", "2026-06-10T00:30:00+00:00", 1, "Asia/Tokyo") == ["2026-06-11T09:00:00+09:00"]
    assert ticks("TZ=Europe/Berlin @daily", "2026-06-10T12:00:00+00:00", 1) == ["2026-06-11T00:00:00+02:00"]


# Spring forward: the wall time does not exist that day, so it fires once, when the clocks jump.
# Fall back: the wall time happens twice; it fires once, at the first occurrence.
@pytest.mark.parametrize(("zone", "spec", "start", "expected"), [
    ("America/New_York", "30 2 * * *", "2026-03-07T12:00:00+00:00",
     ["2026-03-08T03:00:00-04:00", "2026-03-09T02:30:00-04:00"]),
    ("America/New_York", "30 1 * * *", "2026-10-31T12:00:00+00:00",
     ["2026-11-01T01:30:00-04:00", "2026-11-02T01:30:00-05:00"]),
    ("Europe/Berlin", "30 2 * * *", "2026-03-28T12:00:00+00:00",
     ["2026-03-29T03:00:00+02:00", "2026-03-30T02:30:00+02:00"]),
    ("Europe/Berlin", "30 2 * * *", "2026-10-24T12:00:00+00:00",
     ["2026-10-25T02:30:00+02:00", "2026-10-26T02:30:00+01:00"]),
    # Lord Howe moves its clocks by 30 minutes: 02:00 -> 02:30 in October, 02:00 -> 01:30 in April.
    ("Australia/Lord_Howe", "15 2 * * *", "2026-10-03T12:00:00+00:00",
     ["2026-10-04T02:30:00+11:00", "2026-10-05T02:15:00+11:00"]),
    ("Australia/Lord_Howe", "45 1 * * *", "2026-04-04T12:00:00+00:00",
     ["2026-04-05T01:45:00+11:00", "2026-04-06T01:45:00+10:30"]),
])
def test_daylight_saving(zone: str, spec: str, start: str, expected: list[str]) -> None:
    assert ticks(f"CRON_TZ={zone} {spec}", start, 2) == expected
    assert ticks(spec, start, 2, zone) == expected


def _offset(t: float, tz: ZoneInfo) -> timedelta:
    return datetime.fromtimestamp(t, tz).utcoffset() or timedelta(0)


@pytest.mark.parametrize("zone", ["America/New_York", "Europe/Berlin", "Australia/Lord_Howe"])
def test_every_minute_through_both_transitions_fires_once_per_wall_minute(zone: str) -> None:
    """Across a whole year, `* * * * *` never fires twice at one instant nor goes backwards, and each
    transition day has as many firings as it has distinct wall minutes."""
    tz = ZoneInfo(zone)
    s = parse(f"CRON_TZ={zone} * * * * *")
    for month in range(1, 13):
        day = datetime(2026, month, 1, tzinfo=UTC)
        while day.month == month:
            t0 = datetime.combine(day.date(), datetime.min.time(), tz).timestamp()
            t1 = datetime.combine(day.date() + timedelta(days=1), datetime.min.time(), tz).timestamp()
            shift = _offset(t1, tz) - _offset(t0, tz)
            if shift:
                seen, t = [], t0 - 1
                while True:
                    t = s.next(t)  # type: ignore[assignment]
                    if t >= t1:
                        break
                    seen.append(t)
                walls = {datetime.fromtimestamp(x, tz).replace(tzinfo=None) for x in seen}
                assert len(seen) == len(set(seen)) == len(walls)
                if shift > timedelta(0):  # spring: the skipped minutes are not there
                    assert len(seen) == 1440 - shift.total_seconds() // 60
                else:  # fall: the repeated minutes fire once
                    assert len(seen) == 1440
            day += timedelta(days=1)


@pytest.mark.parametrize(("spec", "words"), [
    ("* * *", "expected 5 fields"), ("61 * * * *", "outside 0-59"), ("* 24 * * *", "outside 0-23"),
    ("*/0 * * * *", "bad step"), ("5-1 * * * *", "backwards"), ("0 0 * FOO *", "not a number"),
    ("@every", "empty duration"), ("@every 10x", "invalid duration"), ("@fortnightly", "unknown descriptor"),
    ("CRON_TZ=Mars/Olympus 0 0 * * *", "unknown time zone"), ("0 0 30 2 *", "never fires"), ("", "empty"),
    # digits that are not ASCII (str.isdigit() is true of them; int() takes '٣' and refuses '²')
    ("0 0 ² * *", "not a number"), ("0 ٣ * * *", "not a number"), ("*/² * * * *", "bad step"),
    ("0 0 1-² * *", "not a number"), ("@every ٣s", "invalid duration"),
    ("@every 2562048h", "longer than Go's longest"),  # Go's time.ParseDuration refuses it too
])
def test_bad_specs_name_the_spec(spec: str, words: str) -> None:
    with pytest.raises(InvalidArgumentError) as err:
        parse(spec)
    assert words in str(err.value) and repr(spec) in str(err.value)
    assert err.value.argument == "spec"


def test_unknown_location() -> None:
    with pytest.raises(InvalidArgumentError) as err:
        parse("@daily", "Europe/Atlantis")
    assert err.value.argument == "location" and "Europe/Atlantis" in str(err.value)


def test_go_durations() -> None:
    assert [go_duration(x) for x in (0, 0.5, 1.5, 30, 90, 3600, 5400, 86400)] == [
        "0s", "500ms", "1.5s", "30s", "1m30s", "1h0m0s", "1h30m0s", "24h0m0s"]
    assert parse_go_duration("1h30m") == 5400 and parse_go_duration("1.5h") == 5400
    assert parse_go_duration("2m3.5s") == 123.5 and parse_go_duration("250ms") == 0.25
    with pytest.raises(ValueError):
        parse_go_duration("1d")


def test_option_strings_are_gos() -> None:
    when = datetime(2030, 1, 2, 3, 4, 5, tzinfo=UTC)
    assert [option_string(k, v) for k, v in [
        ("queue", "cron"), ("max_retry", 3), ("timeout", 90), ("deadline", when), ("unique", 3600),
        ("process_at", when), ("process_in", timedelta(minutes=10)), ("retention", 86400), ("group", "g"),
        ("task_id", "x"),
    ]] == ['Queue("cron")', "MaxRetry(3)", "Timeout(1m30s)", "Deadline(Wed Jan  2 03:04:05 UTC 2030)",
           "Unique(1h0m0s)", "ProcessAt(Wed Jan  2 03:04:05 UTC 2030)", "ProcessIn(10m0s)", "Retention(24h0m0s)",
           'Group("g")', 'TaskID("x")']


def test_entry_ids_are_stable_and_options_checked_at_register_time() -> None:
    task = Task("report:daily", b"acme")
    a = make_entry("0 3 * * *", task, None, {"queue": "cron", "max_retry": 3}, location="UTC", entry_id=None, now=0)
    b = make_entry("0 3 * * *", task, {"max_retry": 3}, {"queue": "cron"}, location="UTC", entry_id=None, now=0)
    c = make_entry("0 4 * * *", task, None, {"queue": "cron", "max_retry": 3}, location="UTC", entry_id=None, now=0)
    assert a.id == b.id != c.id
    with pytest.raises(InvalidArgumentError) as err:
        make_entry("0 3 * * *", task, None, {"max_retry": -1}, location="UTC", entry_id=None, now=0)
    assert err.value.argument == "max_retry"
    with pytest.raises(InvalidArgumentError) as err:
        make_entry("0 3 * * *", task, None, {"priority": 1}, location="UTC", entry_id=None, now=0)
    assert err.value.argument == "priority"


def test_entry_bytes_match_a_go_schedulers() -> None:
    """The SchedulerEntry a Go v0.26.0 scheduler wrote for `@every 2s` v:cron "tick" Queue("cq") (golden state),
    byte for byte, given the same id and times."""
    go = bytes.fromhex(
        "0a2464373738343964332d323966332d343765612d383965302d33636266333266323161623612094065766572792032731a06763a"
        "63726f6e22047469636b2a0b517565756528226371222932060888e9b2d8063a060886e9b2d806")
    e = make_entry("@every 2s", Task("v:cron", b"tick"), None, {"queue": "cq"}, location="UTC",
                   entry_id="d77849d3-29f3-47ea-89e0-3cbf32f21ab6", now=0)
    e.next_tick, e.prev_tick = 1795994760.0, 1795994758.0
    assert encode_entry(e) == go
    e.prev_tick = None  # never ran: Go writes its zero time, not nothing
    never = SchedulerEntry()
    never.ParseFromString(encode_entry(e))
    assert never.HasField("prev_enqueue_time") and never.prev_enqueue_time.seconds == GO_ZERO_TIME_SECONDS


def test_an_options_dataclass_contributes_the_fields_it_sets() -> None:
    @dataclass(frozen=True)
    class Opts:  # the shape of an options type: enqueue keywords as fields with defaults
        queue: str = "default"
        max_retry: int = 25
        timeout: float | None = None

    e = make_entry("@daily", Task("t", b""), Opts(queue="cron", timeout=60), {"max_retry": 2}, location="UTC",
                   entry_id=None, now=0)
    assert e.opts == ['Queue("cron")', "Timeout(1m0s)", "MaxRetry(2)"]
