"""Demo handlers and a demo producer that keeps a realistic mix of tasks flowing (for `asynqpy dev`)."""

from __future__ import annotations

import asyncio
import json
import logging
import random
import threading
import time

from asynqpy import typed
from asynqpy.client import Client
from asynqpy.mux import ServeMux
from asynqpy.task import ReceivedTask, Task

log = logging.getLogger("asynqpy.demo")

QUEUES = {"critical": 6, "default": 3, "low": 1}


async def send_email(task: ReceivedTask) -> None:
    """Succeeds after a short pause; one in ten hits a 'temporary' SMTP error and is retried."""
    data = json.loads(task.payload)
    await asyncio.sleep(random.uniform(0.05, 0.4))
    if random.random() < 0.1:
        raise ConnectionError(f"SMTP server busy while sending to {data['to']}")
    task.write_result(json.dumps({"sent_to": data["to"]}).encode())


def build_report(task: ReceivedTask) -> None:
    """A plain function (runs in a thread). Reports for the 'broken' customer always fail and end archived."""
    data = json.loads(task.payload)
    time.sleep(random.uniform(0.2, 1.5))
    if data.get("customer") == "broken-co":
        raise ValueError(f"no billing data for customer {data['customer']!r}")


@typed.task("sync:crm", queue="low")
async def sync_crm(account: int, full: bool = False) -> None:
    """A typed task (shown as `sync_crm(account=7)` in the dashboard). The producer's odd payload without an
    account is archived at once by the typed layer (PayloadMismatch, a SkipRetry), never retried."""
    await asyncio.sleep(random.uniform(0.01, 0.1) * (3 if full else 1))


async def cleanup(task: ReceivedTask) -> None:
    await asyncio.sleep(0.02)


def build_mux() -> ServeMux:
    """A new ServeMux with the demo handlers (the module's `mux` is one; `asynqpy dev` builds its own)."""
    m = ServeMux()
    m.handle("email:send", send_email)
    m.handle("report:", build_report)
    m.handle("sync:crm", sync_crm)
    m.handle("cleanup:", cleanup)
    return m


mux = build_mux()


def _one(client: Client, n: int) -> None:
    r = random.random()
    if r < 0.45:
        to = f"user{random.randint(1, 500)}@example.com"
        client.enqueue(Task("email:send", json.dumps({"to": to, "template": "welcome"}).encode()),
                       queue="critical", max_retry=3, timeout=30)
    elif r < 0.65:
        customer = random.choice(["acme", "globex", "initech", "broken-co"])
        client.enqueue(Task("report:monthly", json.dumps({"customer": customer, "month": "2026-11"}).encode()),
                       queue="default", max_retry=2, retention=3600)
    elif r < 0.85:
        if random.random() > 0.1:
            sync_crm.enqueue(client, n, full=random.random() < 0.2)
        else:  # an old producer's shape: archived at once with "account: required argument is missing"
            client.enqueue(Task("sync:crm", json.dumps({"acct": n}).encode(), {"source": "demo"}), queue="low")
    else:
        client.enqueue(Task("cleanup:tmp", b"older-than=7d"), queue="low", process_in=random.uniform(5, 120))


def produce(redis_url: str, stop: threading.Event, rate: float = 4.0) -> None:
    """Enqueue about `rate` tasks a second until stop is set; Redis hiccups are logged, not fatal."""
    client = Client(redis_url)
    n = 0
    while not stop.is_set():
        try:
            _one(client, n)
            n += 1
        except Exception as exc:  # the demo keeps going through a Redis restart
            log.warning("demo producer: %s", exc)
        stop.wait(random.expovariate(rate))
    client.close()
