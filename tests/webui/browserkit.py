"""The one headless Chromium (Playwright driving Debian's chromium) that every browser test module shares.

Playwright's sync API marks its event loop as running in the thread that drives it, between calls too; in the
main thread that makes every later `asyncio.run` in the session fail ("cannot be called from a running event
loop"), so a browser test module used to break tests that merely ran after it. So Playwright lives in a
thread of its own, owned by the session fixture: the test sees `Remote` stand-ins whose every attribute and
call runs in that thread, and the main thread never holds Playwright's loop. Chromium still starts once per
session. Tests take `expect` from here (it hands the real objects to Playwright's `expect` in its thread).
Event handlers (`page.on("dialog", ...)`) run in the Playwright thread with the real objects, as before.
"""

from __future__ import annotations

import shutil
import threading
import types
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from pathlib import Path
from queue import SimpleQueue
from typing import Any

import pytest

from tests.webui.authkit import PASSWORDS

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
ARTIFACTS = Path(__file__).resolve().parents[1] / "artifacts"

_Call = tuple[Callable[[], Any], "Future[Any]"]


class PlaywrightThread:
    """The thread that starts Playwright and Chromium, runs every call made on them, and stops them."""

    def __init__(self) -> None:
        self._calls: SimpleQueue[_Call | None] = SimpleQueue()
        self._started: Future[Any] = Future()
        self._thread = threading.Thread(target=self._serve, name="playwright", daemon=True)

    def start(self) -> Remote:
        self._thread.start()
        return Remote(self._started.result(timeout=120), self)

    def stop(self) -> None:
        self._calls.put(None)
        self._thread.join(timeout=60)

    def _serve(self) -> None:
        from playwright.sync_api import sync_playwright

        try:
            with sync_playwright() as p:
                chromium = p.chromium.launch(executable_path=CHROMIUM)
                self._started.set_result(chromium)
                while (call := self._calls.get()) is not None:
                    fn, done = call
                    try:
                        done.set_result(fn())
                    except BaseException as exc:  # the test's thread raises it
                        done.set_exception(exc)
                chromium.close()
        except BaseException as exc:
            if not self._started.done():
                self._started.set_exception(exc)
            raise

    def call(self, fn: Callable[[], Any]) -> Any:
        """Run `fn` in the Playwright thread and return its result (directly when already there: a handler)."""
        if threading.current_thread() is self._thread:
            return fn()
        if not self._thread.is_alive():
            raise RuntimeError("the Playwright thread has stopped")
        done: Future[Any] = Future()
        self._calls.put((fn, done))
        return done.result()

    def invoke(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        return self.call(lambda: self.wrap(fn(*_unwrap(args), **_unwrap(kwargs))))

    def wrap(self, value: Any) -> Any:
        if isinstance(value, list):
            return [self.wrap(v) for v in value]
        if isinstance(value, tuple):
            return tuple(self.wrap(v) for v in value)
        if type(value).__module__.startswith("playwright."):
            return Remote(value, self)
        return value


class Remote:
    """A Playwright object that lives in the Playwright thread; attributes and calls are carried out there."""

    __slots__ = ("_owner", "_target")

    def __init__(self, target: Any, owner: PlaywrightThread) -> None:
        self._target = target
        self._owner = owner

    def __getattr__(self, name: str) -> Any:
        owner = self._owner
        value = owner.call(lambda: getattr(self._target, name))
        if isinstance(value, types.MethodType | types.BuiltinMethodType | types.FunctionType):
            return lambda *args, **kwargs: owner.invoke(value, *args, **kwargs)
        return owner.wrap(value)

    def __enter__(self) -> Any:
        return self._owner.invoke(type(self._target).__enter__, self._target)

    def __exit__(self, *exc: Any) -> Any:
        return self._owner.invoke(type(self._target).__exit__, self._target, *exc)

    def __eq__(self, other: object) -> bool:
        return bool(self._target == _unwrap(other))

    def __hash__(self) -> int:
        return hash(self._target)

    def __repr__(self) -> str:
        return f"Remote({self._owner.call(lambda: repr(self._target))})"


def _unwrap(value: Any) -> Any:
    if isinstance(value, Remote):
        return value._target
    if isinstance(value, list | tuple):
        return type(value)(_unwrap(v) for v in value)
    if isinstance(value, dict):
        return {k: _unwrap(v) for k, v in value.items()}
    return value


def expect(actual: Remote, *args: Any, **kwargs: Any) -> Any:
    """Playwright's `expect`, for the stand-ins the `browser` fixture hands out."""
    from playwright.sync_api import expect as playwright_expect

    if not isinstance(actual, Remote):
        raise TypeError(f"expect() takes a page, locator or response from the browser fixture, not {actual!r}")
    return actual._owner.invoke(playwright_expect, actual, *args, **kwargs)


def sign_in(page: Remote, base: str, name: str, password: str | None = None) -> None:
    """Log in through the login form as a user does (name's PASSWORDS entry unless password is given), and wait
    for the overview."""
    page.goto(base + "/login")
    page.get_by_label("Username").fill(name)
    page.get_by_label("Password").fill(PASSWORDS[name] if password is None else password)
    page.get_by_role("button", name="Log in").click()
    page.wait_for_url(base + "/")


@pytest.fixture(scope="session")
def browser() -> Iterator[Any]:
    owner = PlaywrightThread()
    chromium = owner.start()
    try:
        yield chromium
    finally:
        owner.stop()
