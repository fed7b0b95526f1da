"""Per-process reuse of what a live refresh reads besides the snapshot (a queue page's rows, its recent jobs), for
one refresh interval: N browsers polling the same page cost Redis one read per interval and app process, not N.

Only background polls (static/app.js's POLL_HEADER) are served from here: a navigation, a reload and every action
read Redis afresh (and refresh the entry), so what a user asked for is never older than what they just did.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Any, TypeVar

from flask import current_app

from webui.auth import is_background

T = TypeVar("T")
MAX_ENTRIES = 512  # distinct pages kept per process (the oldest are dropped): bounded memory


class PollCache:
    """Values by key, each for max_age seconds (monotonic). Thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._items: OrderedDict[Hashable, tuple[float, Any]] = OrderedDict()

    def get(self, key: Hashable, max_age: float) -> tuple[bool, Any]:
        with self._lock:
            hit = self._items.get(key)
            if hit is None or time.monotonic() - hit[0] > max_age:
                return False, None
            return True, hit[1]

    def put(self, key: Hashable, value: Any) -> None:
        with self._lock:
            self._items[key] = (time.monotonic(), value)
            self._items.move_to_end(key)
            while len(self._items) > MAX_ENTRIES:
                self._items.popitem(last=False)


def polled(key: Hashable, read: Callable[[], T]) -> T:
    """read()'s value, reused for one refresh interval (ASYNQPY_POLL_SECONDS) by background polls of this process.

    Raises what read() raises."""
    app = current_app._get_current_object()  # type: ignore[attr-defined]
    cache: PollCache = app.extensions.setdefault("asynqpy.pollcache", PollCache())
    if is_background():
        found, value = cache.get(key, float(app.config["ASYNQPY_POLL_SECONDS"]))
        if found:
            return value  # type: ignore[no-any-return]
    value = read()
    cache.put(key, value)
    return value
