"""The server-side charts' labels: y-axis ticks are distinct whole numbers however small the figures (an empty or
one-task chart read "1, 0, 0"), and a deploy mark's label stays inside the plot at its right edge (it was cut to
"evil-mar")."""

from __future__ import annotations

import re
import time
from typing import Any

import redis

from inspector import Inspector
from tests.webui.test_web_types import _record
from webui import charts, typecharts
from webui.charts import Day


def _ticks(svg: str) -> list[str]:
    return re.findall(r'<text class="tick" x="[\d.]+" y="[\d.]+" text-anchor="end">([^<]*)</text>', svg)


def test_small_charts_have_distinct_whole_number_ticks() -> None:
    for highest, want in ((0, ["0", "1", "2"]), (1, ["0", "1", "2"]), (3, ["0", "2", "4"]), (4, ["0", "2", "4"]),
                          (7, ["0", "4", "8"])):
        svg = str(charts.daily_bars([Day("2026-12-01", highest, 0), Day("2026-12-02", 0, 0)], "daily"))
        assert _ticks(svg) == want, (highest, _ticks(svg))


def test_the_daily_chart_of_an_empty_database_reads_0_1_2(as_role: Any, redis_url: str) -> None:
    r = redis.Redis.from_url(redis_url)
    r.sadd("asynq:queues", "quiet")
    r.close()
    svg = as_role("viewer").get("/charts/daily?days=7").get_data(as_text=True)
    assert _ticks(svg) == ["0", "1", "2"]


def test_a_mark_at_the_right_edge_keeps_its_label_inside_the_plot(redis_url: str, r: redis.Redis) -> None:
    now = time.time()
    _record(r, "email:send", 5, 0, 0.1, now - 600)
    with Inspector(redis_url) as insp:
        insp.mark("evil-mark-label")
        st = insp.one_type_stats("email:send", "1h")
        marks = insp.marks(now - 3600)
    svg = str(typecharts.timeline(st.points, st.step, marks, "timeline"))
    (label,) = re.findall(r'<text class="mark-label" x="([\d.]+)" y="[\d.]+"( text-anchor="end")?>([^<]*)</text>',
                          svg)
    x, anchored_end, text = label
    assert text == "evil-mark-label"
    right = float(re.search(r'viewBox="0 0 ([\d.]+) ', svg).group(1))  # type: ignore[union-attr]
    assert anchored_end and float(x) <= right  # drawn leftwards from its line, whole
    assert float(x) - typecharts.CHAR_W * len(text) >= 0
