"""The probers of the fault suite: each calls one component over and over (an enqueue, an Inspector read, a CLI
command, a dashboard page or action, a /metrics scrape) and keeps every call with its verdict."""

from __future__ import annotations

import asyncio
import contextlib
import re
import threading
import time
import traceback
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

from asynqpy import AsyncClient, Client, Task
from asynqpy.errors import AsynqError
from inspector import Inspector
from tests.core.procs import ROOT
from tests.core.procs import run as run_cli
from tests.faults.app import WORK
from tests.faults.rig import QUEUE, SPARE, Rig, http_get


@dataclass(frozen=True)
class Call:
    """One call of a component: when it started (monotonic), how long it took, and its verdict: "ok",
    "ours: <our error>" (a clear failure: our error type, a banner, a one-line CLI message) or "theirs: ..."
    (anything else: a redis-py error, a traceback, a 500)."""

    start: float
    seconds: float
    verdict: str

    @property
    def end(self) -> float:
        return self.start + self.seconds


class Ours(Exception):
    """Raised by an op for a clear, expected failure the user can act on (a banner, a one-line CLI error)."""


@dataclass
class Prober:
    """Calls op in a loop until stopped; every call is kept."""

    name: str
    op: Callable[[], None]
    pause: float = 0.1
    calls: list[Call] = field(default_factory=list)

    def loop(self, stop: threading.Event, fault_end: list[float]) -> None:
        while not stop.is_set():
            t0 = time.monotonic()
            try:
                self.op()
                verdict = "ok"
            except (AsynqError, Ours) as exc:
                verdict = f"ours: {type(exc).__name__}: {exc}"
            except Exception as exc:
                verdict = f"theirs: {type(exc).__name__}: {exc}\n{traceback.format_exc(limit=4)}"
            self.calls.append(Call(t0, time.monotonic() - t0, verdict))
            if fault_end and self.recovered(fault_end[0]) is not None:
                return
            stop.wait(self.pause)

    def recovered(self, fault_end: float) -> float | None:
        """Seconds from the fault's end (or from the end of the call still running then) to the end of the first
        successful call started after it; None if there was none."""
        busy_until = max([c.end for c in self.calls if c.start < fault_end] + [fault_end])
        for c in self.calls:
            if c.start >= fault_end and c.verdict == "ok":
                return c.end - busy_until
        return None


class AsyncClientThread:
    """An AsyncClient on an event loop of its own thread, so the prober can call it like the others."""

    def __init__(self, url: str) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.client: AsyncClient = self.call(self._make(url))

    @staticmethod
    async def _make(url: str) -> AsyncClient:
        return AsyncClient(url)

    def call(self, coro: object) -> AsyncClient:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result()  # type: ignore[arg-type]

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.call(self.client.close())
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(5)


def _banner_shown(html: str) -> bool:
    """The page shows the Redis banner (it is always in the page, hidden while Redis answers)."""
    tag = re.search(r'<[^>]*id="redis-banner"[^>]*>', html)
    return tag is not None and not re.search(r"\shidden(?:[\s>=])", tag.group(0))


def probers(rig: Rig, client: Client, aclient: AsyncClientThread, insp: Inspector,
             acked: set[str], lock: threading.Lock) -> dict[str, Prober]:
    def enqueue() -> None:
        info = client.enqueue(Task(WORK, b"20"), queue=QUEUE)
        with lock:
            acked.add(info.id)

    def enqueue_async() -> None:
        info = aclient.call(aclient.client.enqueue(Task(WORK, b"20"), queue=QUEUE))
        with lock:
            acked.add(info.id)  # type: ignore[attr-defined]

    def inspect() -> None:
        insp.queue_info(QUEUE)
        insp.list_tasks(QUEUE, "pending", size=5)

    def cli() -> None:
        proc = run_cli("queue", "info", QUEUE, "--redis-url", rig.url, cwd=ROOT, timeout=60)
        if proc.returncode == 0:
            return
        lines = proc.stderr.strip().splitlines()
        if proc.returncode == 1 and len(lines) == 1 and "Traceback" not in proc.stderr:
            raise Ours(f"exit 1: {lines[0]}")
        raise AssertionError(f"exit {proc.returncode}: {proc.stderr[-1500:]}")

    def page() -> None:
        status, html = rig.browser.open("/")
        banner = _banner_shown(html)
        if status == 200 and not banner:
            return
        if status in (200, 503) and banner:
            raise Ours(f"{status} with the Redis banner")
        raise AssertionError(f"GET / answered {status}{' with' if banner else ' without'} the banner: {html[:300]}")

    flip = ["pause"]

    def action() -> None:
        status, html = rig.browser.post(f"/queues/{SPARE}/{flip[0]}", {"state": "pending"})
        if status == 200:
            flip[0] = "resume" if flip[0] == "pause" else "pause"
            return
        if status == 503 and "Redis" in html:  # htmx gets the banner's message as a partial
            raise Ours(f"{status}: Redis is unavailable")
        if status == 409:  # the last answer was lost: the queue is already in the state asked for
            flip[0] = "resume" if flip[0] == "pause" else "pause"
            raise Ours("409: already so")
        raise AssertionError(f"POST {flip[0]} answered {status}: {html[:300]}")

    def scrape(base: str) -> Callable[[], None]:
        def op() -> None:
            status, text = http_get(base + "/metrics")
            if status != 200:
                raise AssertionError(f"/metrics answered {status}: {text[:300]}")
            if "asynqpy_redis_up 0" in text:
                raise Ours("asynqpy_redis_up 0")
            if "asynqpy_redis_up 1" not in text:
                raise AssertionError(f"/metrics has no asynqpy_redis_up: {text[:300]}")
        return op

    return {
        "client": Prober("client", enqueue),
        "async_client": Prober("async_client", enqueue_async),
        "inspector": Prober("inspector", inspect),
        "cli": Prober("cli", cli, pause=0.3),
        "dashboard_page": Prober("dashboard_page", page, pause=0.2),
        "dashboard_action": Prober("dashboard_action", action, pause=0.2),
        "dashboard_metrics": Prober("dashboard_metrics", scrape(rig.web_base), pause=0.2),
        "exporter": Prober("exporter", scrape(rig.exporter_base), pause=0.2),
    }


def summary(calls: list[Call]) -> str:
    """The verdicts of a prober's calls, counted (for failure messages)."""
    return ", ".join(f"{n}x {v.splitlines()[0][:160]}" for v, n in Counter(c.verdict for c in calls).items())
