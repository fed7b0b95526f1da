"""The `asynqpy dev` add-on: a Scheduler with demo entries beside the demo worker, so the Inspector, the CLI and
the dashboard have cron entries, next runs and enqueue history to show."""

from __future__ import annotations

import argparse
import asyncio
import json
import threading

from asynqpy.plugins import DevContext, RunningAddon
from asynqpy.scheduler.core import Scheduler
from asynqpy.task import Task

# Task types the demo worker (asynqpy.demo) handles, with payloads that fit its handlers (sync_crm takes an int
# account): every tick succeeds. The demo's one deliberate misfit is in asynqpy.demo's producer.
DEMO_ENTRIES = (
    ("@every 30s", Task("sync:crm", json.dumps({"account": 42, "full": False}).encode()), {"queue": "low"}),
    ("*/5 * * * *", Task("report:usage", json.dumps({"customer": "acme"}).encode()), {"max_retry": 3}),
    ("CRON_TZ=Europe/Berlin 0 3 * * *", Task("cleanup:tmp", b"older-than=7d"), {"queue": "low", "timeout": 600}),
)


class SchedulerAddon:
    name = "scheduler"

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--no-scheduler", action="store_true", help="do not run the demo cron entries")

    def start(self, ctx: DevContext) -> RunningAddon:
        if getattr(ctx.args, "no_scheduler", False):
            return RunningAddon()
        scheduler = Scheduler(ctx.redis_url)
        for spec, task, opts in DEMO_ENTRIES:
            scheduler.register(spec, task, **opts)
        thread = threading.Thread(target=lambda: asyncio.run(scheduler.arun()), name="asynqpy-scheduler",
                                  daemon=True)
        thread.start()

        def stop() -> None:
            scheduler.stop()
            thread.join(10)

        return RunningAddon(banner=[f"Scheduler: {len(DEMO_ENTRIES)} demo cron entries (asynqpy cron ls)"],
                            stop=stop)


addon = SchedulerAddon()
