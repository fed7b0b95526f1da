"""The dashboard shows a typed task's payload as the call it stands for (through the Inspector's display form)
when the task type is registered in the dashboard's process, escaped like every payload; JSON otherwise."""

from __future__ import annotations

import html
from typing import Any

from asynqpy import Client, ServeMux, Task

mux = ServeMux()


@mux.task("web:typed:invoice", queue="webtyped")
def send_invoice(customer: str, lines: list[str]) -> None:
    """Only its payloads are read here."""


def test_task_page_and_queue_list_show_the_call(as_role: Any, redis_url: str) -> None:
    with Client(redis_url) as client:
        info = send_invoice.enqueue(client, "<b>ACME</b>", ["a"])
        plain = client.enqueue(Task("web:untyped", b'{"customer":"ACME"}'), queue="webtyped")
    c = as_role("viewer")
    page = c.get(f"/queues/webtyped/tasks/{info.id}").get_data(as_text=True)
    call = "send_invoice(customer='<b>ACME</b>', lines=['a'])"
    assert call in html.unescape(page) and "<b>ACME</b>" not in page  # shown, and escaped
    assert '<pre class="payload call">' in page
    listing = c.get("/queues/webtyped/pending").get_data(as_text=True)
    assert call in html.unescape(listing) and "<b>ACME</b>" not in listing
    other = c.get(f"/queues/webtyped/tasks/{plain.id}").get_data(as_text=True)
    assert '<pre class="payload json"' in other
