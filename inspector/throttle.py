"""The dashboard's login throttle in Redis, shared by every app process: each attempt is counted atomically
before its password is checked, per (account, address) or per trusted device and per address, and an account
guessed at from many addresses is slowed by a growing wait rather than locked.

Keys (all under asynqpy:{web}:throttle:, one hash tag, so one script may touch them all on a cluster):
``pair:<account>|<address>`` and ``addr:<address>`` count within a window that starts with the first failure;
``device:<id>`` counts a trusted browser's failures (see webui.devices) in place of the pair and the address;
``account:<account>`` holds the failures from every untrusted browser and the time the next may be checked.
webui reaches it through this class; it never imports redis.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import redis

from asynqpy.rdb import keys
from asynqpy.rdb.scripts import Call
from asynqpy.rdb.syncdoor import SyncDoor
from inspector.scripts import script

FIRST_WAIT = 1.0  # seconds an attempt waits after the account's first failure past the free ones; doubles after


@dataclass(frozen=True)
class Attempt:
    """One login attempt: allowed (counted as a failure until refunded), or refused without a password check.

    scope: what refused it ("pair": this account from this address, "device": this trusted browser, "address":
    this address for every account, "account": the account's growing wait), "" when allowed. retry_after:
    seconds until it may be tried again. keys: what refund() gives back.
    """

    allowed: bool
    retry_after: int = 0
    scope: str = ""
    keys: tuple[str, ...] = ()
    counters: int = 0

    def message(self) -> str:
        """What the login page says to a refused attempt (the same for a known and an unknown account)."""
        wait = self.retry_after
        when = f"{wait} second{'s' if wait != 1 else ''}" if wait < 120 else f"{(wait + 59) // 60} minutes"
        if self.scope == "account":
            return (f"This account had many failed logins; try again in {when}. A browser that has logged in to "
                    "this account before is not slowed.")
        if self.scope == "address":
            return f"Too many failed logins from your address. Try again in {when}."
        return f"Too many failed logins for this account. Try again in {when}."


class LoginThrottle:
    """per_pair: failures of one account from one address (or one trusted browser) per window; per_addr:
    failures from one address per window, every account together; slow_after: failures of an account from all
    untrusted browsers before each further attempt waits FIRST_WAIT, doubling up to max_wait seconds.

    connection: a binary redis-py client, or its door (asynqpy.rdb.syncdoor). Every method raises
    RedisUnavailableError (the subclass of its kind) for Redis trouble that passes, RedisCommandError for a
    command Redis refused.
    """

    def __init__(self, connection: redis.Redis | SyncDoor, *, per_pair: int = 5, per_addr: int = 20, window: int = 900,
                 slow_after: int = 5, max_wait: float = 60.0, clock: Callable[[], float] = time.time) -> None:
        self.door = SyncDoor.of(connection)
        self.per_pair = per_pair
        self.per_addr = per_addr
        self.window = int(window)
        self.slow_after = slow_after
        self.max_wait = max_wait
        self.clock = clock

    def attempt(self, account: str, address: str, device: str | None = None) -> Attempt:
        """Count one attempt for account from address before its password is checked; device: the id of the
        trusted-browser cookie this browser showed for account (then only that device's failures count)."""
        name = account.lower()[:200]
        if device:
            counters = [keys.login_throttle("device", device[:64])]
            limits, scopes = [self.per_pair], ["device"]
        else:
            counters = [keys.login_throttle("pair", f"{name}|{address[:64]}"),
                        keys.login_throttle("addr", address[:64]), keys.login_throttle("account", name)]
            limits, scopes = [self.per_pair, self.per_addr], ["pair", "address", "account"]
        args = (self.window, int(self.clock() * 1000), self.slow_after, int(FIRST_WAIT * 1000),
                int(self.max_wait * 1000), len(limits), *limits)
        which, wait = self.door.run(Call(script("login_attempt"), counters, args, _pair))
        if which:
            return Attempt(False, max(1, wait), scopes[which - 1])
        return Attempt(True, keys=tuple(counters), counters=len(limits))

    def refund(self, attempt: Attempt) -> None:
        """After a successful login: the attempt was no failure (its pair or device counter is cleared)."""
        if not attempt.allowed or not attempt.keys:
            return
        self.door.run(Call(script("login_refund"), attempt.keys, (attempt.counters,), _any))


def _pair(reply: Any) -> tuple[int, int]:
    return int(reply[0]), int(reply[1])


def _any(reply: Any) -> Any:
    return reply
