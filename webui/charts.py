"""Small server-side SVG charts (no JavaScript, nothing the CSP blocks): daily processed/failed bars and
queue sizes over time. Colours come from CSS classes; every label is escaped."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from markupsafe import Markup, escape

from inspector.samples import STATES, SizeSample

W, H, PAD_L, PAD_B, PAD_T = 720, 180, 44, 22, 8


@dataclass(frozen=True)
class Day:
    label: str
    processed: int
    failed: int


def nice_top(highest: int) -> int:
    """The value at the top of a chart's y axis: highest rounded up to an even number (at least 2), so the middle
    tick is a whole number too (a top of 1 labelled its 0.5 tick "0": "1, 0, 0")."""
    top = max(2, int(highest))
    return top + top % 2


def _axis(top: int) -> str:
    parts = []
    for frac in (0.0, 0.5, 1.0):
        y = PAD_T + (H - PAD_T - PAD_B) * (1 - frac)
        parts.append(f'<line class="grid" x1="{PAD_L}" y1="{y:.1f}" x2="{W}" y2="{y:.1f}"/>'
                     f'<text class="tick" x="{PAD_L - 4}" y="{y + 4:.1f}" text-anchor="end">'
                     f'{_short(top * frac)}</text>')
    return "".join(parts)


def _short(v: float) -> str:
    if v >= 1e6:
        return f"{v / 1e6:.1f}M"
    if v >= 1e3:
        return f"{v / 1e3:.1f}k"
    return f"{v:.0f}"


def _svg(label: str, body: str) -> Markup:
    return Markup(f'<svg class="chart" viewBox="0 0 {W} {H}" role="img" aria-label="{escape(label)}">'
                  f'{body}</svg>')


def daily_bars(days: Sequence[Day], label: str) -> Markup:
    """Processed (succeeded part and failed part stacked) per day, oldest left."""
    if not days:
        return Markup('<p class="empty">No daily counts yet.</p>')
    top = nice_top(max(d.processed for d in days))
    plot_h = H - PAD_T - PAD_B
    slot = (W - PAD_L) / len(days)
    bar = max(1.0, slot * 0.7)
    parts = [_axis(top)]
    every = max(1, len(days) // 8)
    for i, d in enumerate(days):
        x = PAD_L + i * slot + (slot - bar) / 2
        ok_h = plot_h * max(0, d.processed - d.failed) / top
        fail_h = plot_h * min(d.failed, d.processed or d.failed) / top
        base = PAD_T + plot_h
        tip = escape(f"{d.label}: {d.processed} processed, {d.failed} failed")
        parts.append(f'<g><title>{tip}</title>'
                     f'<rect class="ok" x="{x:.1f}" y="{base - ok_h:.1f}" width="{bar:.1f}" height="{ok_h:.1f}"/>'
                     f'<rect class="fail" x="{x:.1f}" y="{base - ok_h - fail_h:.1f}" width="{bar:.1f}" '
                     f'height="{fail_h:.1f}"/></g>')
        if i % every == 0:
            parts.append(f'<text class="tick" x="{x + bar / 2:.1f}" y="{H - 6}" text-anchor="middle">'
                         f'{escape(d.label[5:])}</text>')
    return _svg(label, "".join(parts))


def size_lines(samples: Sequence[SizeSample], label: str, queue: str | None = None) -> Markup:
    """One line per state (pending, active, scheduled, retry, archived) of one queue (or of the "*" totals),
    or, with queue None, all queues summed."""
    if len(samples) < 2:
        return Markup('<p class="empty">Queue sizes are sampled every few seconds while the dashboard runs; '
                      'the chart appears after the second sample.</p>')
    t0, t1 = samples[0].t, samples[-1].t
    series = {st: [_state_total(s, i, queue) for s in samples] for i, st in enumerate(STATES)}
    top = nice_top(max(max(v) for v in series.values()))
    plot_h = H - PAD_T - PAD_B
    span_t = max(1e-9, t1 - t0)
    parts = [_axis(top)]
    for st, values in series.items():
        pts = " ".join(f"{PAD_L + (W - PAD_L) * (s.t - t0) / span_t:.1f},{PAD_T + plot_h * (1 - v / top):.1f}"
                       for s, v in zip(samples, values, strict=True))
        parts.append(f'<polyline class="line {st}" points="{pts}"><title>{st}</title></polyline>')
    for t, anchor, x in ((t0, "start", PAD_L), (t1, "end", W)):
        hhmm = datetime.fromtimestamp(t, tz=UTC).strftime("%H:%M UTC")
        parts.append(f'<text class="tick" x="{x}" y="{H - 6}" text-anchor="{anchor}">{hhmm}</text>')
    legend = "".join(f'<span class="key {st}">{st}</span>' for st in STATES)
    return Markup(f'{_svg(label, "".join(parts))}<div class="legend">{legend}</div>')


def _state_total(s: SizeSample, i: int, queue: str | None) -> int:
    rows = [s.sizes.get(queue, ())] if queue is not None else list(s.sizes.values())
    return sum(r[i] for r in rows if len(r) > i)
