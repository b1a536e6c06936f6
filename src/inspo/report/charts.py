"""Line charts as inline SVG strings: no JavaScript, no external resources.

Rules:

- x and y are plain floats; a series is drawn as one ``<polyline>`` per run of consecutive
  points (a ``None`` or non-finite y, NaN or infinite, breaks the line: a metric a step did not
  record reads NaN) and a dot for a run of one point, inside one
  ``<g class="series" data-series="NAME">`` per series, so a reader (or a test) can count them;
- vertical markers (pruning, evolution) are ``<line class="marker">`` elements across the plot;
- every piece of text is escaped with :func:`html.escape`;
- an empty chart (no point at all) renders a short "not recorded" box instead of axes.
"""

from __future__ import annotations

import html
import math
from collections.abc import Sequence
from dataclasses import dataclass

PALETTE = (
    "#1f77b4",
    "#ff7f0e",
    "#2ca02c",
    "#d62728",
    "#9467bd",
    "#8c564b",
    "#e377c2",
    "#17becf",
    "#bcbd22",
    "#393b79",
)
DASHES = ("", "6 3", "2 3")


@dataclass(frozen=True)
class Series:
    """One line: ``points`` are (x, y) pairs in x order; y ``None`` leaves a gap."""

    name: str
    points: Sequence[tuple[float, float | None]]
    color: str = ""
    dash: str = ""
    width: float = 1.8
    opacity: float = 1.0


@dataclass(frozen=True)
class Marker:
    """A vertical line at ``x``; ``kind`` picks its style (``prune`` or ``evolve``)."""

    x: float
    kind: str
    label: str = ""


MARKER_STYLE = {
    "prune": ("#7f7f7f", "4 3", 1.2),
    "evolve": ("#e6a700", "", 2.4),
}


def style_series(series: Sequence[Series]) -> list[Series]:
    """Give series without a colour a palette colour, and a dash pattern once colours repeat; a
    non-finite y (NaN, infinite) becomes a gap (``None``)."""
    out = []
    for i, s in enumerate(series):
        points = [(x, y if y is not None and math.isfinite(y) else None) for x, y in s.points]
        if s.color:
            out.append(Series(s.name, points, s.color, s.dash, s.width, s.opacity))
            continue
        color = PALETTE[i % len(PALETTE)]
        dash = DASHES[(i // len(PALETTE)) % len(DASHES)]
        out.append(Series(s.name, points, color, dash, s.width, s.opacity))
    return out


def nice_ticks(lo: float, hi: float, count: int = 5) -> list[float]:
    """About ``count`` round tick values (1, 2, 5 x 10^k steps) covering [lo, hi]."""
    if not math.isfinite(lo) or not math.isfinite(hi):
        return [0.0]
    if hi <= lo:
        hi = lo + (abs(lo) or 1.0)
    raw = (hi - lo) / max(1, count)
    mag = 10 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 5, 10) if m * mag >= raw)
    start = math.floor(lo / step) * step
    ticks = []
    t = start
    while t <= hi + step * 1e-9:
        ticks.append(round(t, 10))
        t += step
    if ticks[-1] < hi:
        ticks.append(round(t, 10))
    return ticks


def _fmt(v: float) -> str:
    if v == int(v) and abs(v) < 1e6:
        return str(int(v))
    if abs(v) >= 100:
        return f"{v:.0f}"
    return f"{v:.3g}"


@dataclass(frozen=True)
class _Frame:
    """Where a chart's plot area lies in the SVG and which data ranges it shows: maps a data point
    to SVG coordinates."""

    left: int
    top: int
    plot_w: int
    plot_h: int
    x_lo: float
    x_hi: float
    y_lo: float
    y_hi: float

    def px(self, x: float) -> float:
        """The SVG x of data x."""
        return self.left + (x - self.x_lo) / (self.x_hi - self.x_lo) * self.plot_w

    def py(self, y: float) -> float:
        """The SVG y of data y (SVG's y grows downwards)."""
        return self.top + self.plot_h - (y - self.y_lo) / (self.y_hi - self.y_lo) * self.plot_h


def line_chart(
    series: Sequence[Series],
    *,
    title: str,
    x_label: str,
    y_label: str,
    markers: Sequence[Marker] = (),
    width: int = 860,
    height: int = 280,
    y_min: float | None = None,
    y_max: float | None = None,
    chart_id: str = "",
) -> str:
    """An SVG line chart (rules in the module docstring)."""
    series = style_series(series)
    xs = [x for s in series for x, y in s.points if y is not None]
    ys = [y for s in series for _, y in s.points if y is not None]
    esc = html.escape
    if not xs:
        return (
            f'<div class="chart-empty" data-chart="{esc(chart_id)}"><b>{esc(title)}</b>: '
            f"not recorded in this run</div>"
        )
    left, right, top, bottom = 62, 18, 30, 44
    plot_w, plot_h = width - left - right, height - top - bottom
    marker_xs = [m.x for m in markers]
    x_lo, x_hi = min(xs + marker_xs), max(xs + marker_xs)
    if x_hi == x_lo:
        x_lo, x_hi = x_lo - 1, x_hi + 1
    lo = min(ys) if y_min is None else min(y_min, min(ys))
    hi = max(ys) if y_max is None else max(y_max, max(ys))
    y_ticks = nice_ticks(lo, hi)
    x_ticks = [t for t in nice_ticks(x_lo, x_hi, 8) if x_lo <= t <= x_hi]
    frame = _Frame(left, top, plot_w, plot_h, x_lo, x_hi, y_ticks[0], y_ticks[-1])
    parts = [
        f'<svg class="chart" data-chart="{esc(chart_id)}" '
        f'viewBox="0 0 {width} {height}" width="{width}" height="{height}" role="img" '
        f'aria-label="{esc(title)}">',
        f'<text x="{left}" y="18" class="chart-title">{esc(title)}</text>',
        f'<rect x="{left}" y="{top}" width="{plot_w}" height="{plot_h}" class="plot-bg"/>',
        *_axes(frame, x_ticks, y_ticks),
        *(_marker_line(frame, m) for m in markers),
        *(_series_group(frame, s) for s in series),
        f'<text x="{left + plot_w / 2:.1f}" y="{height - 6}" class="axis-label" '
        f'text-anchor="middle">{esc(x_label)}</text><text x="14" y="{top + plot_h / 2:.1f}" '
        'class="axis-label" text-anchor="middle" transform="rotate(-90 14 '
        f'{top + plot_h / 2:.1f})">{esc(y_label)}</text>',
        "</svg>",
    ]
    return "".join(parts)


def _axes(frame: _Frame, x_ticks: Sequence[float], y_ticks: Sequence[float]) -> list[str]:
    """The grid lines and labels of the y ticks, the marks and labels of the x ticks, and the two
    axes, as SVG elements."""
    left, top, plot_w, plot_h = frame.left, frame.top, frame.plot_w, frame.plot_h
    parts = []
    for t in y_ticks:
        y = frame.py(t)
        parts.append(
            f'<line x1="{left}" x2="{left + plot_w}" y1="{y:.1f}" y2="{y:.1f}" class="grid"/>'
        )
        parts.append(
            f'<text x="{left - 6}" y="{y + 4:.1f}" class="tick" text-anchor="end">{_fmt(t)}</text>'
        )
    for t in x_ticks:
        x = frame.px(t)
        parts.append(
            f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{top + plot_h}" y2="{top + plot_h + 4}" '
            'class="axis"/>'
        )
        parts.append(
            f'<text x="{x:.1f}" y="{top + plot_h + 17}" class="tick" text-anchor="middle">{_fmt(t)}'
            "</text>"
        )
    parts.append(
        f'<line x1="{left}" x2="{left + plot_w}" y1="{top + plot_h}" y2="{top + plot_h}" '
        f'class="axis"/><line x1="{left}" x2="{left}" y1="{top}" y2="{top + plot_h}" class="axis"/>'
    )
    return parts


def _marker_line(frame: _Frame, m: Marker) -> str:
    """Marker ``m`` as a vertical SVG line across the plot, in its kind's style, with a tooltip."""
    esc = html.escape
    color, dash, w = MARKER_STYLE.get(m.kind, ("#999", "2 2", 1.0))
    x = frame.px(m.x)
    dash_attr = f' stroke-dasharray="{dash}"' if dash else ""
    return (
        f'<line class="marker marker-{esc(m.kind)}" x1="{x:.1f}" x2="{x:.1f}" y1="{frame.top}" '
        f'y2="{frame.top + frame.plot_h}" stroke="{color}" stroke-width="{w}"{dash_attr} '
        f'opacity="0.75"><title>{esc(m.label or m.kind)} (step {_fmt(m.x)})</title></line>'
    )


def _series_group(frame: _Frame, s: Series) -> str:
    """Series ``s`` as one SVG group: a polyline per run of consecutive points, a dot for a run
    of one point."""
    esc = html.escape
    px, py = frame.px, frame.py
    parts = [f'<g class="series" data-series="{esc(s.name)}">']
    dash_attr = f' stroke-dasharray="{s.dash}"' if s.dash else ""
    for run in _runs(s.points):
        if len(run) == 1:
            x, y = run[0]
            parts.append(
                f'<circle cx="{px(x):.1f}" cy="{py(y):.1f}" r="2.6" fill="{s.color}" '
                f'opacity="{s.opacity}"><title>{esc(s.name)}: {_fmt(y)} at {_fmt(x)}</title>'
                "</circle>"
            )
            continue
        pts = " ".join(f"{px(x):.1f},{py(y):.1f}" for x, y in run)
        parts.append(
            f'<polyline points="{pts}" fill="none" stroke="{s.color}" stroke-width="{s.width}" '
            f'stroke-linejoin="round" opacity="{s.opacity}"{dash_attr}><title>{esc(s.name)}'
            "</title></polyline>"
        )
    parts.append("</g>")
    return "".join(parts)


def legend(series: Sequence[Series], markers: Sequence[Marker] = ()) -> str:
    """An HTML legend: a swatch per series (in the colours :func:`style_series` gives) and
    one per marker kind present."""
    esc = html.escape
    items = []
    for s in style_series(series):
        dash = f' stroke-dasharray="{s.dash}"' if s.dash else ""
        items.append(
            '<span class="legend-item"><svg width="26" height="10" aria-hidden="true"><line x1="1" '
            f'x2="25" y1="5" y2="5" stroke="{s.color}" stroke-width="2.5"{dash}/>'
            f"</svg>{esc(s.name)}</span>"
        )
    names = {"prune": "pruning step", "evolve": "evolution step"}
    for kind in dict.fromkeys(m.kind for m in markers):
        color, dash, w = MARKER_STYLE.get(kind, ("#999", "2 2", 1.0))
        dash_attr = f' stroke-dasharray="{dash}"' if dash else ""
        items.append(
            '<span class="legend-item"><svg width="14" height="14" aria-hidden="true"><line x1="7" '
            f'x2="7" y1="0" y2="14" stroke="{color}" stroke-width="{w}"{dash_attr}/>'
            f"</svg>{esc(names.get(kind, kind))}</span>"
        )
    return f'<div class="legend">{"".join(items)}</div>'


def _runs(points: Sequence[tuple[float, float | None]]) -> list[list[tuple[float, float]]]:
    runs: list[list[tuple[float, float]]] = [[]]
    for x, y in points:
        if y is None or (isinstance(y, float) and not math.isfinite(y)):
            if runs[-1]:
                runs.append([])
            continue
        runs[-1].append((x, y))
    return [r for r in runs if r]


def share_bar(
    parts: Sequence[tuple[str, float, str]], *, width: int = 560, height: int = 26
) -> str:
    """A horizontal stacked bar of (label, value, colour) parts, as SVG."""
    total = sum(v for _, v, _ in parts)
    if total <= 0:
        return '<div class="chart-empty">no rollouts recorded</div>'
    x = 0.0
    out = [f'<svg class="bar" width="{width}" height="{height}" viewBox="0 0 {width} {height}">']
    for label, value, color in parts:
        w = value / total * width
        out.append(
            f'<rect x="{x:.1f}" y="0" width="{w:.1f}" height="{height}" fill="{color}">'
            f"<title>{html.escape(label)}: {value:g} ({100 * value / total:.1f}%)</title></rect>"
        )
        x += w
    out.append("</svg>")
    return "".join(out)
