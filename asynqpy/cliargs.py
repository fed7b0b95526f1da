"""argparse `type=` validators shared by every `asynqpy` command: a bad value is argparse's usage error (the
command's usage, one line naming the option and the value, exit 2), never a traceback from deeper down."""

from __future__ import annotations

import argparse
import ipaddress
import math
from collections.abc import Callable

from asynqpy.backpressure import parse_duration
from asynqpy.errors import InvalidArgumentError

MAX_PORT = 65535


def whole(minimum: int, maximum: int | None = None) -> Callable[[str], int]:
    """A whole number of at least minimum (and at most maximum, when given)."""

    def parse(text: str) -> int:
        try:
            n = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
        if n < minimum:
            raise argparse.ArgumentTypeError(f"must be at least {minimum}, got {n}")
        if maximum is not None and n > maximum:
            raise argparse.ArgumentTypeError(f"must be at most {maximum}, got {n}")
        return n

    return parse


positive = whole(1)  # a count: at least 1
port = whole(0, MAX_PORT)  # a TCP port; 0: any free one


def number(minimum: float = 0.0, *, above: bool = False) -> Callable[[str], float]:
    """A finite number of at least minimum (above it, with above=True): never nan, inf or -inf."""

    def parse(text: str) -> float:
        try:
            x = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
        if not math.isfinite(x):
            raise argparse.ArgumentTypeError(f"expected a finite number, got {text!r}")
        if x < minimum or (above and x == minimum):
            raise argparse.ArgumentTypeError(f"must be {'above' if above else 'at least'} {minimum:g}, got {text}")
        return x

    return parse


seconds = number(0.0)  # a duration in seconds, 0 allowed
interval = number(0.0, above=True)  # seconds between two things: above 0
# Tasks per second of a background job (`task run|archive|delete --all --rate`, `task find --run ... --rate`);
# 0: as fast as bounded steps go. The one validator of every job's --rate.
job_rate = number(0.0)


def duration(*, above_zero: bool = False) -> Callable[[str], float]:
    """A duration such as 10m, 90s, 1.5h or 250ms (a bare number: seconds), in seconds."""

    def parse(text: str) -> float:
        try:
            x = parse_duration(text)
        except InvalidArgumentError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None
        if above_zero and x <= 0:
            raise argparse.ArgumentTypeError(f"must be above 0, got {text!r}")
        return x

    return parse


def network(text: str) -> str:
    """An IP address or network (10.0.0.5, 10.0.0.0/8, ::1), returned as given."""
    try:
        ipaddress.ip_network(text.strip(), strict=False)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an IP address or network (e.g. 10.0.0.5 or 10.0.0.0/8), "
                                         f"got {text!r}") from None
    return text
