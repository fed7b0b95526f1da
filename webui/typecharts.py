"""SVG charts of the types page (server-side, no JavaScript): per-step sparklines with deploy marks drawn as
labelled vertical lines, and a run-time histogram over the fixed buckets. Every label is escaped."""

from __future__ import annotations

from collections.abc import Sequence

from markupsafe import Markup, escape

from asynqpy.typestats import BUCKETS
from inspector.typestats import Mark

SW, SH = 160, 28
W, H, PAD_L, PAD_B, PAD_T = 720, 180, 44, 22, 14


def _bound(b: float) -> str:
    return f"{b * 1000:g}ms" if b < 1 else f"{b:g}s"


def bucket_labels() -> list[str]:
    return [f"≤{_bound(b)}" for b in BUCKETS] + [f">{_bound(BUCKETS[-1])}"]


MARK_CHARS = 30  # a mark's label on a chart (the whole label is its <title>)
CHAR_W = 6.0  # about one character of the 10 px label font, in viewBox units


def _mark_label(label: str, x: float, right: float, y: float) -> str:
    """A mark's label beside its line, inside the plot: right of the line, or left of it (anchored at its end)
    when it would run past the plot's right edge (it was clipped: "evil-mar")."""
    shown = label if len(label) <= MARK_CHARS else label[:MARK_CHARS - 1] + "\u2026"
    if x + 2 + CHAR_W * len(shown) <= right:
        return f'<text class="mark-label" x="{x + 2:.1f}" y="{y:.1f}">{escape(shown)}</text>'
    return f'<text class="mark-label" x="{x - 2:.1f}" y="{y:.1f}" text-anchor="end">{escape(shown)}</text>'


def _mark_lines(marks: Sequence[Mark], t0: float, t1: float, x0: float, w: float, top: float, bottom: float,
                *, labels: bool) -> str:
    out = []
    for m in marks:
        if not t0 <= m.at <= t1:
            continue
        x = x0 + w * (m.at - t0) / max(1e-9, t1 - t0)
        text = _mark_label(m.label, x, x0 + w, top + 9) if labels else ""
        out.append(f'<g class="mark"><title>{escape(m.label)}</title><line x1="{x:.1f}" y1="{top:.1f}" '
                   f'x2="{x:.1f}" y2="{bottom:.1f}"/>{text}</g>')
    return "".join(out)


def sparkline(points: Sequence[tuple[int, int, int]], step: int, marks: Sequence[Mark], label: str) -> Markup:
    """Runs per step (line) and failures (red bars), oldest left; marks as vertical lines."""
    if not points:
        return Markup("")
    top = max(1, max(n for _, n, _ in points))
    t0, t1 = points[0][0], points[-1][0] + step
    dx = SW / len(points)
    line = " ".join(f"{(i + 0.5) * dx:.1f},{SH - 2 - (SH - 4) * n / top:.1f}" for i, (_, n, _) in enumerate(points))
    fails = "".join(f'<rect class="fail" x="{i * dx:.1f}" y="{SH - (SH - 4) * f / top - 2:.1f}" '
                    f'width="{max(dx, 1):.1f}" height="{(SH - 4) * f / top:.1f}"/>'
                    for i, (_, _, f) in enumerate(points) if f)
    body = (f'<polyline class="runs" points="{line}"/>{fails}'
            f'{_mark_lines(marks, t0, t1, 0, SW, 0, SH, labels=False)}')
    return Markup(f'<svg class="spark" viewBox="0 0 {SW} {SH}" role="img" aria-label="{escape(label)}">'
                  f'<title>{escape(label)}</title>{body}</svg>')


def timeline(points: Sequence[tuple[int, int, int]], step: int, marks: Sequence[Mark], label: str) -> Markup:
    """The one-type page's larger chart: runs per step, failures stacked, marks labelled."""
    if not points:
        return Markup('<p class="empty">No runs recorded.</p>')
    top = max(1, max(n for _, n, _ in points))
    plot_h, plot_w = H - PAD_T - PAD_B, W - PAD_L
    slot = plot_w / len(points)
    parts = [f'<text class="tick" x="{PAD_L - 4}" y="{PAD_T + 4}" text-anchor="end">{top}</text>',
             f'<line class="grid" x1="{PAD_L}" y1="{PAD_T + plot_h}" x2="{W}" y2="{PAD_T + plot_h}"/>']
    for i, (_, n, f) in enumerate(points):
        x, base = PAD_L + i * slot, PAD_T + plot_h
        ok_h, fail_h = plot_h * (n - f) / top, plot_h * f / top
        parts.append(f'<rect class="ok" x="{x:.1f}" y="{base - ok_h:.1f}" width="{max(slot * .8, .5):.1f}" '
                     f'height="{ok_h:.1f}"/><rect class="fail" x="{x:.1f}" y="{base - ok_h - fail_h:.1f}" '
                     f'width="{max(slot * .8, .5):.1f}" height="{fail_h:.1f}"/>')
    parts.append(_mark_lines(marks, points[0][0], points[-1][0] + step, PAD_L, plot_w, PAD_T - 10, PAD_T + plot_h,
                             labels=True))
    return Markup(f'<svg class="chart" viewBox="0 0 {W} {H}" role="img" aria-label="{escape(label)}">'
                  f'{"".join(parts)}</svg>')


def histogram(buckets: Sequence[int], label: str) -> Markup:
    """Runs per run-time bucket, shortest left, each bar titled with its bound and count."""
    if not any(buckets):
        return Markup('<p class="empty">No runs recorded.</p>')
    top = max(buckets)
    plot_h, slot = H - PAD_T - PAD_B, (W - PAD_L) / len(buckets)
    parts = []
    for i, (n, name) in enumerate(zip(buckets, bucket_labels(), strict=True)):
        x, h = PAD_L + i * slot, plot_h * n / top
        parts.append(f'<g><title>{escape(name)}: {n}</title><rect class="ok" x="{x:.1f}" y="{PAD_T + plot_h - h:.1f}" '
                     f'width="{slot * .8:.1f}" height="{h:.1f}"/></g>')
        if i % 3 == 0:
            parts.append(f'<text class="tick" x="{x + slot * .4:.1f}" y="{H - 6}" text-anchor="middle">'
                         f'{escape(name)}</text>')
    return Markup(f'<svg class="chart" viewBox="0 0 {W} {H}" role="img" aria-label="{escape(label)}">'
                  f'{"".join(parts)}</svg>')


def firings(times: Sequence[float], now: float, label: str) -> Markup:
    """A scheduler entry's recent firings as ticks on a strip from the oldest one shown to now."""
    if not times:
        return Markup('<span class="muted">none yet</span>')
    t0 = min(times)
    span = max(1.0, now - t0)
    ticks = "".join(f'<line x1="{2 + (SW - 4) * (t - t0) / span:.1f}" y1="4" x2="{2 + (SW - 4) * (t - t0) / span:.1f}" '
                    f'y2="{SH - 4}"/>' for t in times)
    return Markup(f'<svg class="spark firings" viewBox="0 0 {SW} {SH}" role="img" aria-label="{escape(label)}">'
                  f'<title>{escape(label)}</title>{ticks}</svg>')
