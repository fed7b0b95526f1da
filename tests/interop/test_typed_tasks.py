"""Typed tasks with the real Go asynq: Go's json.Marshal of a struct runs a decorated Python function with
converted types, and a Go handler decodes what Python enqueues with json.Unmarshal into the same struct; on
every asynq release of the version matrix."""

from __future__ import annotations

import dataclasses
import enum
import json
import threading
from datetime import datetime, timedelta, timezone
from decimal import Decimal
from typing import Any
from uuid import UUID

import pytest

from asynqpy import Client, ServeMux

from .goasynq import GoPeer, GoPeerError, wait_until
from .test_python_works_go_tasks import running_server

CET = timezone(timedelta(hours=1))
DUE = datetime(2026, 3, 1, 9, 30, 0, 120000, tzinfo=CET)
INVOICE_ID = UUID("2f1d3c4b-5a69-4788-9aab-bccddeeff001")


class Tier(enum.Enum):
    FREE = "free"
    PRO = "pro"


@dataclasses.dataclass(frozen=True)
class Line:
    sku: str
    qty: int
    unit_price: Decimal


def invoice_task(mux: ServeMux, task_type: str, calls: list[dict[str, Any]]) -> Any:
    lock = threading.Lock()

    @mux.task(task_type, max_retry=3)
    def send_invoice(invoice_id: UUID, customer: str, amount: Decimal, due: datetime, tier: Tier,
                     lines: list[Line], note: str | None = None, attachment: bytes = b"") -> None:
        with lock:
            calls.append(dict(invoice_id=invoice_id, customer=customer, amount=amount, due=due, tier=tier,
                              lines=lines, note=note, attachment=attachment))
    return send_invoice


def typed(go_peer: GoPeer, *args: str, timeout: float = 60) -> list[dict[str, Any]]:
    out = go_peer._run("typed", *args, timeout=timeout)
    return [json.loads(line) for line in out.splitlines() if line.strip()]


SAMPLE = dict(invoice_id=INVOICE_ID, customer="Ada Lovelace", amount=Decimal("1234.50"), due=DUE, tier=Tier.PRO,
              lines=[Line("A-1", 2, Decimal("9.95")), Line("B-7", 1, Decimal("0.10"))],
              note="rush <fragile> & dry", attachment=b"\x00\xff\x01")


def test_go_enqueues_a_struct_that_a_typed_python_function_runs(go_any: GoPeer, redis_url: str) -> None:
    mux, calls = ServeMux(), []
    send_invoice = invoice_task(mux, "invoice:send:interop", calls)
    (out,) = typed(go_any, "--mode", "enqueue", "--type", "invoice:send:interop")
    # Python writes the very bytes Go's json.Marshal wrote (so unique locks of both collide)
    assert send_invoice.to_task(**SAMPLE).payload == out["payload"].encode()
    with running_server(redis_url, mux):
        wait_until(lambda: calls, "the typed Python call")
    assert calls == [SAMPLE]
    assert calls[0]["due"].utcoffset() == timedelta(hours=1)


def test_python_enqueues_a_call_that_a_go_handler_decodes_into_the_struct(go_any: GoPeer, redis_url: str) -> None:
    send_invoice = invoice_task(ServeMux(), "invoice:send:to-go", [])
    with Client(redis_url) as client:
        info = send_invoice.enqueue(client, **{**SAMPLE, "note": None})
    out = typed(go_any, "--mode", "work", "--type", "invoice:send:to-go", "--expect", "1", "--duration", "20s")
    assert [o["event"] for o in out] == ["decoded"], out
    inv = out[0]["invoice"]
    assert inv == {"invoice_id": str(INVOICE_ID), "customer": "Ada Lovelace", "amount": "1234.50",
                   "due": "2026-03-01T09:30:00.12+01:00", "tier": "pro",
                   "lines": [{"sku": "A-1", "qty": 2, "unit_price": "9.95"},
                             {"sku": "B-7", "qty": 1, "unit_price": "0.10"}],
                   "note": None, "attachment": "AP8B"}
    assert out[0]["due_unix_nano"] == int(DUE.timestamp()) * 10**9 + 120_000_000
    assert out[0]["due_offset_s"] == 3600
    with pytest.raises(GoPeerError, match="task not found"):  # Go's handler succeeded: the task is deleted
        go_any.task_info("default", info.id)
