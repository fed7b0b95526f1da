"""The login throttle over real HTTP (werkzeug's threaded server): nobody can lock an account out from elsewhere,
an account guessed at from many addresses is slowed by a growing wait, a browser that logged in before is not
slowed, and parallel guesses cannot pass a limit (each attempt is counted before its password is checked).

The app trusts 127.0.0.1 as its proxy, so each test browser picks its address with X-Forwarded-For."""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from tests.webui.authkit import make_app
from tests.webui.livekit import Browser, Clock, serve


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def live(redis_url: str, users_path: Path, clock: Clock) -> Iterator[dict[str, Any]]:
    app = make_app(redis_url, users_path, ASYNQPY_TRUSTED_PROXIES="127.0.0.1", ASYNQPY_CLOCK=clock)
    with serve(app) as base:
        yield {"base": base, "app": app}
    app.extensions["asynqpy.inspector"].close()


def _at(live: dict[str, Any], addr: str) -> Browser:
    return Browser(live["base"], **{"X-Forwarded-For": addr})


def test_failures_from_one_address_do_not_lock_the_account_elsewhere(live: dict[str, Any]) -> None:
    attacker = _at(live, "203.0.113.66")
    for _ in range(5):
        assert attacker.login("vera", "guess").status == 401
    assert _at(live, "198.51.100.7").login("vera").status == 303  # vera, from her own address, gets in at once
    refused = attacker.login("vera", "guess")
    assert refused.status == 429 and "Too many failed logins for this account" in refused.text
    assert 800 < int(refused.headers["Retry-After"]) <= 900  # that address, for that account, waits the window


def test_an_account_guessed_at_from_many_addresses_is_slowed_by_a_growing_wait(live: dict[str, Any],
                                                                              clock: Clock) -> None:
    for i in range(5):  # the first five failures of the account cost nothing
        assert _at(live, f"203.0.113.{i}").login("vera", "guess").status == 401
    waits = []
    for i in range(10, 14):
        assert _at(live, f"203.0.113.{i}").login("vera", "guess").status == 401
        refused = _at(live, "198.51.100.7").login("vera")  # even the right password waits its turn
        assert refused.status == 429 and "A browser that has logged in to this account before" in refused.text
        waits.append(int(refused.headers["Retry-After"]))
        clock.t += waits[-1]
    assert waits == [1, 2, 4, 8]
    assert _at(live, "198.51.100.7").login("vera").status == 303  # the wait is over: no lock


def test_a_browser_that_logged_in_before_is_not_slowed_by_others_failures(live: dict[str, Any]) -> None:
    mine = _at(live, "198.51.100.7")
    assert mine.login("vera").status == 303
    device = mine.cookie("asynqpy_device")
    assert device is not None and device.has_nonstandard_attr("HttpOnly") and device.path == "/"
    mine.open("/logout", {"csrf_token": mine.token()})
    for i in range(12):  # others, from many addresses, keep the account waiting
        _at(live, f"203.0.113.{i}").login("vera", "guess")
    assert _at(live, "198.51.100.8").login("vera").status == 429  # a new browser waits
    assert mine.login("vera").status == 303  # this one gets in at once
    forged = _at(live, "198.51.100.9")
    forged.jar.set_cookie(_copy(device, value=device.value[:-3] + "AAA"))
    assert forged.login("vera").status == 429  # a tampered device cookie counts for nothing


def test_a_trusted_browser_that_guesses_wrong_is_limited_on_its_own(live: dict[str, Any]) -> None:
    mine = _at(live, "198.51.100.7")
    assert mine.login("otto").status == 303
    mine.open("/logout", {"csrf_token": mine.token()})
    for _ in range(5):
        assert mine.login("otto", "typo").status == 401
    assert mine.login("otto").status == 429  # the device's own limit
    assert _at(live, "198.51.100.7").login("otto").status == 303  # not the address's, nor the account's


def test_parallel_guesses_from_one_address_get_at_most_the_limit_of_password_checks(live: dict[str, Any]) -> None:
    tokens = [_at(live, "203.0.113.66") for _ in range(40)]

    def guess(b: Browser) -> int:
        return b.login("ada", "guess").status

    with ThreadPoolExecutor(40) as pool:
        statuses = list(pool.map(guess, tokens))
    assert statuses.count(401) == 5, statuses  # five password checks, however the 40 interleave
    assert statuses.count(429) == 35


def test_parallel_guesses_from_many_addresses_pass_the_free_failures_by_at_most_one(live: dict[str, Any]) -> None:
    browsers = [_at(live, f"203.0.113.{i}") for i in range(40)]
    with ThreadPoolExecutor(40) as pool:
        statuses = list(pool.map(lambda b: b.login("ada", "guess").status, browsers))
    assert statuses.count(401) <= 6 and statuses.count(401) + statuses.count(429) == 40, statuses


def _copy(cookie: Any, **changes: Any) -> Any:
    import copy

    c = copy.copy(cookie)
    for k, v in changes.items():
        setattr(c, k, v)
    return c


@pytest.mark.cluster_too
def test_the_throttle_scripts_run_on_a_cluster_too(redis_url: str) -> None:
    """Every throttle key carries the {web} hash tag, so each script's keys share a slot on a cluster."""
    from inspector import Inspector
    from inspector.throttle import LoginThrottle

    clock = Clock()
    with Inspector(redis_url) as insp:
        t = LoginThrottle(insp.redis, per_pair=3, slow_after=1, clock=clock)
        first = t.attempt("ada", "192.0.2.1")
        assert first.allowed
        t.refund(first)
        attempts = [t.attempt("ada", "192.0.2.1") for _ in range(3)]
        assert [a.allowed for a in attempts] == [True, True, False]  # one free failure, then slowed
        assert attempts[2].scope == "account" and attempts[2].retry_after == 1
        clock.t += 1
        assert t.attempt("ada", "192.0.2.1").allowed  # waited its second
        refused = t.attempt("ada", "192.0.2.1")
        assert not refused.allowed and refused.scope == "pair" and refused.retry_after > 800
        assert t.attempt("ada", "192.0.2.2", device="d1").allowed  # a trusted browser counts on its own
