"""A tasks module that the CLI tests import by name (--tasks / ASYNQPY_TASKS), as an app's would be."""

from __future__ import annotations

from datetime import date

from asynqpy import ServeMux

mux = ServeMux()


@mux.task("insp:invoice", queue="billing")
def send_invoice(customer: str, due: date, lines: list[str]) -> None:
    """Never run by these tests: they only read its payloads."""
