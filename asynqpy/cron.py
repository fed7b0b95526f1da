"""Cron specs as Go asynq's scheduler accepts them, and the next time each one fires, in a real time zone.

Accepted: five fields (minute hour day-of-month month day-of-week) with `*`, `?`, ranges `a-b`, steps
`*/n`, `a-b/n`, `a/n`, lists `a,b`, month names JAN-DEC and weekday names SUN-SAT (7 is Sunday too);
`@yearly`/`@annually`, `@monthly`, `@weekly`, `@daily`/`@midnight`, `@hourly`; `@every <Go duration>`;
and a `CRON_TZ=Area/City ` (or `TZ=`) prefix. Day-of-month and day-of-week combine as in Vixie cron:
when both are restricted either may match, otherwise both must.

Times are Unix seconds. Wall times come from zoneinfo (the tzdata package supplies zones where the OS has
none). Daylight saving: a wall time that does not exist that day fires once, at the first valid instant
after it (the moment the clocks jump); a wall time that occurs twice fires once, at its first occurrence.
`@every` ticks are multiples of the interval since the Unix epoch, so every replica computes the same ones.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from asynqpy.errors import InvalidArgumentError

_MONTHS = {n: i + 1 for i, n in enumerate(
    ["JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC"])}
_DAYS = {n: i for i, n in enumerate(["SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"])}
_DESCRIPTORS = {
    "@yearly": "0 0 1 1 *", "@annually": "0 0 1 1 *", "@monthly": "0 0 1 * *", "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *", "@midnight": "0 0 * * *", "@hourly": "0 * * * *",
}
_UNITS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "μs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}
_DURATION = re.compile(r"(\d+\.?\d*|\.\d+)(ns|us|µs|μs|ms|s|m|h)", re.ASCII)
# Go's longest time.Duration (2562047h47m16.854775807s); time.ParseDuration refuses a longer one.
MAX_GO_DURATION = (2**63 - 1) / 1e9
# How far ahead a cron spec is searched before it is declared never to fire (robfig/cron's limit).
_SEARCH_YEARS = 5


def _bad(spec: str, why: str) -> InvalidArgumentError:
    return InvalidArgumentError(f"bad cron spec {spec!r}: {why}", argument="spec")


def parse_go_duration(text: str) -> float:
    """Seconds in a Go duration string ("30s", "1h30m", "1.5h", "500ms"). Raises ValueError."""
    s = text.strip()
    if s == "0":
        return 0.0
    pos, total = 0, 0.0
    if not s:
        raise ValueError("empty duration")
    while pos < len(s):
        m = _DURATION.match(s, pos)
        if m is None:
            raise ValueError(f"invalid duration {text!r} (e.g. 30s, 1h30m, 500ms)")
        total += float(m.group(1)) * _UNITS[m.group(2)]
        pos = m.end()
    if total > MAX_GO_DURATION:
        raise ValueError(f"invalid duration {text!r}: longer than Go's longest, 2562047h47m16.854775807s")
    return total


def go_duration(seconds: float) -> str:
    """Go's time.Duration.String() of a duration in seconds: 90 -> "1m30s", 3600 -> "1h0m0s", 0.5 -> "500ms"."""
    ns = round(seconds * 1e9)
    if ns == 0:
        return "0s"
    sign, ns = ("-", -ns) if ns < 0 else ("", ns)
    if ns < 1_000_000_000:
        for unit, size in (("ms", 1_000_000), ("µs", 1_000), ("ns", 1)):
            if ns >= size:
                return sign + _trim(ns / size) + unit
    h, rest = divmod(ns, 3_600_000_000_000)
    m, rest = divmod(rest, 60_000_000_000)
    secs = _trim(rest / 1e9) + "s"
    if h:
        return f"{sign}{h}h{m}m{secs}"
    if m:
        return f"{sign}{m}m{secs}"
    return sign + secs


def _trim(x: float) -> str:
    return f"{x:.9f}".rstrip("0").rstrip(".")


def zone(name: str, *, argument: str = "location") -> ZoneInfo:
    """The IANA zone called name. Raises InvalidArgumentError naming the argument for an unknown zone."""
    if not isinstance(name, str) or not name.strip():
        raise InvalidArgumentError(f"{argument} must be an IANA time zone name such as 'Europe/Berlin'",
                                   argument=argument)
    try:
        return ZoneInfo(name.strip())
    except (ZoneInfoNotFoundError, ValueError) as exc:
        raise InvalidArgumentError(f"unknown time zone {name!r} ({argument})", argument=argument) from exc


class Schedule:
    """When an entry fires: .next(after) is the first firing strictly after Unix time after, or None."""

    spec: str

    def next(self, after: float) -> float | None:
        raise NotImplementedError

    def prev(self, at: float) -> float | None:
        """The last firing at or before at (None if there is none in the last few years)."""
        raise NotImplementedError


@dataclass(frozen=True)
class Every(Schedule):
    """`@every d`: the multiples of d whole seconds since the Unix epoch."""

    spec: str
    interval: int

    def next(self, after: float) -> float:
        return float((math.floor(after / self.interval) + 1) * self.interval)

    def prev(self, at: float) -> float:
        return float(math.floor(at / self.interval) * self.interval)


@dataclass(frozen=True)
class Cron(Schedule):
    """A five-field spec evaluated on the wall clock of tz."""

    spec: str
    tz: ZoneInfo
    minutes: frozenset[int]
    hours: frozenset[int]
    days: frozenset[int]
    months: frozenset[int]
    weekdays: frozenset[int]
    days_star: bool
    weekdays_star: bool

    def _day_ok(self, d: datetime) -> bool:
        dom = d.day in self.days
        dow = (d.isoweekday() % 7) in self.weekdays
        if self.days_star or self.weekdays_star:
            return dom and dow
        return dom or dow

    def _next_wall(self, w: datetime, limit: datetime) -> datetime | None:
        """The first naive wall time >= w (whole minutes) matching every field, or None past limit."""
        while w <= limit:
            if w.month not in self.months:
                y, m = (w.year + 1, 1) if w.month == 12 else (w.year, w.month + 1)
                w = datetime(y, m, 1)
            elif not self._day_ok(w):
                w = datetime(w.year, w.month, w.day) + timedelta(days=1)
            elif w.hour not in self.hours:
                w = w.replace(minute=0) + timedelta(hours=1)
            elif w.minute not in self.minutes:
                w += timedelta(minutes=1)
            else:
                return w
        return None

    def _instant(self, wall: datetime) -> float:
        """The Unix time of a wall time: its first occurrence, or for a wall time skipped by a jump of the
        clocks, the first instant after it (the jump itself)."""
        first = wall.replace(tzinfo=self.tz, fold=0).timestamp()
        if datetime.fromtimestamp(first, self.tz).replace(tzinfo=None) == wall:
            return first
        lo = int(wall.replace(tzinfo=self.tz, fold=1).timestamp())  # before the jump, its wall time < wall
        hi = math.ceil(first)  # after the jump
        if lo > hi:
            lo, hi = hi, lo
        while lo < hi:  # the first second whose wall time is past the missing one
            mid = (lo + hi) // 2
            if datetime.fromtimestamp(mid, self.tz).replace(tzinfo=None) >= wall:
                hi = mid
            else:
                lo = mid + 1
        return float(lo)

    def next(self, after: float) -> float | None:
        local = datetime.fromtimestamp(after, self.tz).replace(tzinfo=None, second=0, microsecond=0)
        w: datetime | None = local + timedelta(minutes=1)
        limit = local.replace(year=local.year + _SEARCH_YEARS) if not (local.month == 2 and local.day == 29) \
            else local + timedelta(days=365 * _SEARCH_YEARS)
        while w is not None:
            w = self._next_wall(w, limit)
            if w is None:
                return None
            t = self._instant(w)
            if t > after:
                return t
            w += timedelta(minutes=1)
        return None

    def prev(self, at: float) -> float | None:
        window = 120.0
        while window < 366 * 86400 * _SEARCH_YEARS:
            t = self.next(at - window)
            if t is not None and t <= at:
                while True:
                    n = self.next(t)
                    if n is None or n > at:
                        return t
                    t = n
            window *= 8
        return None


def _digits(text: str) -> bool:
    """Only ASCII digits, as Go's strconv.Atoi takes them (str.isdigit() is also true of '²' and '٣')."""
    return text.isascii() and text.isdigit()


def _number(spec: str, text: str, names: dict[str, int]) -> int:
    up = text.upper()
    if up in names:
        return names[up]
    if not _digits(text):
        raise _bad(spec, f"{text!r} is not a number" + (" or a name" if names else ""))
    return int(text)


def _field(spec: str, text: str, lo: int, hi: int, what: str, names: dict[str, int]) -> tuple[frozenset[int], bool]:
    """The values a field allows, and whether it is unrestricted (`*` or `?`, without a step > 1)."""
    values: set[int] = set()
    star = False
    for part in text.split(","):
        rng, _, step_text = part.partition("/")
        step = 1
        if step_text:
            if not _digits(step_text) or int(step_text) == 0:
                raise _bad(spec, f"bad step {step_text!r} in the {what} field")
            step = int(step_text)
        if rng in ("*", "?"):
            start, end = lo, (6 if what == "day-of-week" else hi)
            star = star or step == 1
        elif "-" in rng:
            a, _, b = rng.partition("-")
            start, end = _number(spec, a, names), _number(spec, b, names)
        else:
            start = _number(spec, rng, names)
            end = hi if step_text else start
        if not (lo <= start <= hi and lo <= end <= hi):
            raise _bad(spec, f"{part!r} is outside {lo}-{hi} in the {what} field")
        if start > end:
            raise _bad(spec, f"range {part!r} runs backwards in the {what} field")
        values.update(range(start, end + 1, step))
    if what == "day-of-week" and 7 in values:  # 7 is Sunday too
        values = (values - {7}) | {0}
    return frozenset(values), star


def parse(spec: str, location: str = "UTC") -> Schedule:
    """The Schedule of spec, evaluated in location unless the spec has a CRON_TZ= prefix.

    Raises InvalidArgumentError (argument "spec", or "location" for a bad location) naming the spec.
    """
    if not isinstance(spec, str):
        raise InvalidArgumentError(f"spec must be a str, not {type(spec).__name__}", argument="spec")
    tz = zone(location)
    body = spec.strip()
    if body.startswith(("CRON_TZ=", "TZ=")):
        head, _, body = body.partition(" ")
        name = head.split("=", 1)[1]
        try:
            tz = zone(name, argument="spec")
        except InvalidArgumentError as exc:
            raise _bad(spec, f"unknown time zone {name!r}") from exc
        body = body.strip()
    if not body:
        raise _bad(spec, "it is empty")
    if body.startswith("@every"):
        arg = body[len("@every"):].strip()
        try:
            secs = parse_go_duration(arg)
        except ValueError as exc:
            raise _bad(spec, str(exc)) from exc
        return Every(spec, max(1, int(secs)))
    if body.startswith("@"):
        if body.lower() not in _DESCRIPTORS:
            raise _bad(spec, f"unknown descriptor {body!r} (use @every, @hourly, @daily, @weekly, @monthly, @yearly)")
        body = _DESCRIPTORS[body.lower()]
    fields = body.split()
    if len(fields) != 5:
        raise _bad(spec, f"expected 5 fields (minute hour day-of-month month day-of-week), got {len(fields)}")
    minutes, _ = _field(spec, fields[0], 0, 59, "minute", {})
    hours, _ = _field(spec, fields[1], 0, 23, "hour", {})
    days, days_star = _field(spec, fields[2], 1, 31, "day-of-month", {})
    months, _ = _field(spec, fields[3], 1, 12, "month", _MONTHS)
    weekdays, weekdays_star = _field(spec, fields[4], 0, 7, "day-of-week", _DAYS)
    sched = Cron(spec, tz, minutes, hours, days, months, weekdays, days_star, weekdays_star)
    if sched.next(datetime.now(UTC).timestamp()) is None:
        raise _bad(spec, f"it never fires (checked {_SEARCH_YEARS} years ahead)")
    return sched
