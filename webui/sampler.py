"""Queue sizes for the overview's last-hour chart: each app process runs a sampler thread from its start (not
from its first page view), and per interval only the one that claims the slot in Redis writes a sample, so the
chart has one point per interval however many processes (gunicorn workers, hosts) run."""

from __future__ import annotations

import logging
import threading

from flask import Flask

from asynqpy.errors import AsynqError
from inspector.api import Inspector

log = logging.getLogger("asynqpy.web")


def sample_once(insp: Inspector, interval: float, keep: int) -> bool:
    """Take this interval's sample if no other process has. Returns whether this call wrote it."""
    if not insp.claim_size_sample(interval):
        return False
    insp.record_size_sample(insp.queue_infos(memory=False), keep=keep)
    return True


def _loop(insp: Inspector, interval: float, keep: int, stop: threading.Event) -> None:
    while not stop.wait(interval - (insp.now() % interval)):
        try:
            sample_once(insp, interval, keep)
        except (AsynqError, OSError) as exc:
            log.debug("queue-size sample skipped: %s", exc)
        except Exception:  # the sampler must never die and leave the chart flat without a word
            log.exception("queue-size sample failed")


def start(app: Flask) -> None:
    """Start this process's sampler thread now, once (no-op when sampling is off or already running)."""
    begin = app.extensions.get("asynqpy.sampler_start")
    if begin is not None:
        begin()


def init_app(app: Flask) -> None:
    """Make the sampler ready: `asynqpy web` starts it in each gunicorn worker as the worker boots (so the
    last hour is sampled while nobody looks), any other server with its first request."""
    interval = float(app.config["ASYNQPY_SAMPLE_SECONDS"])
    if interval <= 0 or app.testing:
        return
    stop = threading.Event()
    app.extensions["asynqpy.sampler_stop"] = stop
    started = threading.Lock()
    state = {"on": False}

    def begin() -> None:
        if state["on"]:
            return
        with started:
            if not state["on"]:
                insp = app.extensions["asynqpy.inspector"]
                threading.Thread(target=_loop, args=(insp, interval, int(app.config["ASYNQPY_SAMPLE_KEEP"]), stop),
                                 name="asynqpy-web-sampler", daemon=True).start()
                state["on"] = True

    app.extensions["asynqpy.sampler_start"] = begin
    app.before_request(begin)
