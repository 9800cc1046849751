"""Small inline SVG charts of the last hour: a line for a reading, coloured bands for a link state.

The x axis is time (the hour before the page was rendered, right edge now), so a gap in the readings
shows as a gap. Every number written is formatted here; no text from outside enters the SVG but the
caller's title, which is escaped.
"""

from __future__ import annotations

import html
from collections.abc import Sequence

__all__ = ["GAP_S", "HEIGHT", "WIDTH", "line_chart", "state_chart"]

WIDTH, HEIGHT = 84, 22
GAP_S = 300.0  # points further apart than this are not joined: the collector did not answer in between
_PAD = 1.5


def _x(at: float, start: float, window_s: float) -> float:
    return round(max(0.0, min(1.0, (at - start) / window_s)) * WIDTH, 1)


def _svg(title: str, body: str, css_class: str) -> str:
    label = html.escape(title, quote=True)
    return (f'<svg class="spark {css_class}" width="{WIDTH}" height="{HEIGHT}" viewBox="0 0 {WIDTH} {HEIGHT}" '
            f'role="img" aria-label="{label}"><title>{label}</title>'
            f'<rect class="frame" x="0" y="0" width="{WIDTH}" height="{HEIGHT}"/>{body}</svg>')


def _per_column(points: Sequence[tuple[float, float]], start: float, window_s: float
                ) -> list[tuple[float, float]]:
    """At most one point per pixel column, the column's highest (a chart cannot show more, and the worst
    value of a minute must not vanish between two pixels)."""
    columns: dict[int, tuple[float, float]] = {}
    for at, value in points:
        column = int((at - start) / window_s * WIDTH)
        kept = columns.get(column)
        if kept is None or value > kept[1]:
            columns[column] = (at if kept is None else kept[0], value)
    return [columns[column] for column in sorted(columns)]


def line_chart(points: Sequence[tuple[float, float]], now: float, *, window_s: float, low: float, high: float,
               title: str, limit: float | None = None) -> str:
    """``points`` (time, value) as a polyline scaled to [low, high] (widened to fit every value); a dashed
    line at ``limit`` when it falls inside."""
    start = now - window_s
    shown = _per_column([(at, value) for at, value in points if start <= at <= now], start, window_s)
    if not shown:
        return _svg(title + ": no readings in the last hour", "", "empty")
    low = min(low, *(value for _, value in shown))
    high = max(high, *(value for _, value in shown))
    span = max(high - low, 1e-9)

    def y(value: float) -> float:
        return round(HEIGHT - _PAD - (value - low) / span * (HEIGHT - 2 * _PAD), 1)

    runs: list[list[str]] = [[]]
    previous: float | None = None
    for at, value in shown:
        if previous is not None and at - previous > GAP_S:
            runs.append([])
        runs[-1].append(f"{_x(at, start, window_s)},{y(value)}")
        previous = at
    body = ""
    if limit is not None and low < limit < high:
        body += f'<line class="limit" x1="0" x2="{WIDTH}" y1="{y(limit)}" y2="{y(limit)}"/>'
    for run in runs:
        if len(run) == 1:
            x, y_value = run[0].split(",")
            body += f'<circle cx="{x}" cy="{y_value}" r="1.2"/>'
        else:
            body += f'<polyline points="{" ".join(run)}"/>'
    return _svg(title, body, "line")


def state_chart(points: Sequence[tuple[float, float]], now: float, *, window_s: float, title: str) -> str:
    """A state (1 up, 0 down) as bands: each reading holds until the next one or for ``GAP_S`` at most; readings
    in a row of the same state are one band."""
    start = now - window_s
    shown = [(at, value >= 0.5) for at, value in points if start <= at <= now]
    if not shown:
        return _svg(title + ": no readings in the last hour", "", "empty")
    bands: list[tuple[float, float, bool]] = []  # (from, until, up)
    for index, (at, up) in enumerate(shown):
        until = min(shown[index + 1][0] if index + 1 < len(shown) else now, at + GAP_S)
        if bands and bands[-1][2] == up and bands[-1][1] >= at:
            bands[-1] = (bands[-1][0], until, up)
        else:
            bands.append((at, until, up))
    body = ""
    for began, until, up in bands:
        x0 = _x(began, start, window_s)
        width = max(1.0, round(_x(until, start, window_s) - x0 + 0.4, 1))  # neighbours overlap: no seams
        state = "up" if up else "down"
        body += f'<rect class="{state}" x="{x0}" y="{_PAD + 3}" width="{width}" height="{HEIGHT - 2 * _PAD - 6}"/>'
    return _svg(title, body, "state")
