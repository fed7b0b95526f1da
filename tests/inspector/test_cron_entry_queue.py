"""The queue a scheduler entry enqueues into, read from the option texts Go's %q wrote (asynq's Queue("...")):
the cron controls act on it and the dashboard's per-queue roles judge the entry by it, so both read it alike."""

from __future__ import annotations

import pytest

from inspector.croncontrols import entry_queue
from inspector.models import SchedulerEntry


def _entry(*opts: str) -> SchedulerEntry:
    return SchedulerEntry("e1", "@every 1m", "job", b"{}", opts, None, None, "s1")


@pytest.mark.parametrize(("opt", "queue"), [
    ('Queue("billing:eu")', "billing:eu"),
    ('Queue("hr:\\"x\\"")', 'hr:"x"'),  # Go escapes a quote; the raw text would be another queue's name
    ('Queue("a\\x01b")', "a\x01b"),  # a control character: JSON has no \x escape, Go writes one
    ('Queue("café \\U0001f600")', "café \U0001f600"),
    ("Queue(plain)", "plain"),  # not quoted: the text itself
])
def test_go_quoted_queue_names(opt: str, queue: str) -> None:
    assert entry_queue(_entry("MaxRetry(3)", opt)) == queue


def test_without_a_queue_option_it_is_default() -> None:
    assert entry_queue(_entry("MaxRetry(3)", 'Timeout(30s)')) == "default"
