"""A cron schedule in plain words ("every day at 03:00 Europe/Berlin"), for pages and the CLI."""

from __future__ import annotations

from asynqpy.cron import Cron, Every, Schedule

_DAY_NAMES = ("Sunday", "Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday")
_MONTH_NAMES = ("January", "February", "March", "April", "May", "June", "July", "August", "September", "October",
                "November", "December")


def _span(seconds: int) -> str:
    for one, many, n in (("every day", "days", 86400), ("every hour", "h", 3600), ("every minute", "min", 60)):
        if seconds % n == 0:
            k = seconds // n
            return one if k == 1 else f"every {k} {many}"
    return f"every {seconds} s"


def _list(values: list[str]) -> str:
    return values[0] if len(values) == 1 else ", ".join(values[:-1]) + " and " + values[-1]


def _times(c: Cron) -> str:
    minutes, hours = sorted(c.minutes), sorted(c.hours)
    if len(minutes) == 60 and len(hours) == 24:
        return "every minute"
    if len(hours) == 24:
        if len(minutes) == 1:
            return f"every hour at :{minutes[0]:02d}"
        return "every hour at minutes " + _list([f":{m:02d}" for m in minutes])
    if len(minutes) * len(hours) <= 6:
        return "at " + _list([f"{h:02d}:{m:02d}" for h in hours for m in minutes])
    return f"at minutes {_list([str(m) for m in minutes])} of hours {_list([str(h) for h in hours])}"


def _days(c: Cron) -> str:
    all_days, all_weekdays = len(c.days) == 31, len(c.weekdays) == 7
    parts = []
    if all_days and all_weekdays:
        parts.append("every day")
    elif all_days or c.days_star:
        parts.append("every " + _list([_DAY_NAMES[d] for d in sorted(c.weekdays)]))
    elif all_weekdays or c.weekdays_star:
        parts.append("on day " + _list([str(d) for d in sorted(c.days)]) + " of the month")
    else:
        parts.append("on day " + _list([str(d) for d in sorted(c.days)]) + " of the month or every "
                     + _list([_DAY_NAMES[d] for d in sorted(c.weekdays)]))
    if len(c.months) < 12:
        parts.append("in " + _list([_MONTH_NAMES[m - 1] for m in sorted(c.months)]))
    return " ".join(parts)


def describe(schedule: Schedule) -> str:
    """Plain words for a parsed schedule: "every 30 s", "every day at 03:00 Europe/Berlin",
    "every Monday and Friday at 09:30 UTC", "every hour at :15 UTC"."""
    if isinstance(schedule, Every):
        return _span(schedule.interval)
    if isinstance(schedule, Cron):
        times, days = _times(schedule), _days(schedule)
        zone = str(schedule.tz)
        if times.startswith("every") and days == "every day":
            return f"{times} {zone}"
        if times.startswith("every"):
            return f"{times}, {days} {zone}"
        return f"{days} {times} {zone}"
    return schedule.spec
