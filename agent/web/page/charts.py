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


def line_chart(points: Sequence[tuple[float, float]], now: float, *, window_s: float, low: float, high: float,
               title: str, limit: float | None = None) -> str:
    """``points`` (time, value) as a polyline scaled to [low, high] (widened to fit every value); a dashed
    line at ``limit`` when it falls inside."""
    start = now - window_s
    shown = [(at, value) for at, value in points if start <= at <= now]
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
    """A state (1 up, 0 down) as bands: each reading holds until the next one or for ``GAP_S`` at most."""
    start = now - window_s
    shown = [(at, value) for at, value in points if start <= at <= now]
    if not shown:
        return _svg(title + ": no readings in the last hour", "", "empty")
    body = ""
    for index, (at, value) in enumerate(shown):
        until = shown[index + 1][0] if index + 1 < len(shown) else now
        until = min(until, at + GAP_S)
        x0 = _x(at, start, window_s)
        width = max(1.0, round(_x(until, start, window_s) - x0 + 0.4, 1))  # neighbours overlap: no seams
        state = "up" if value >= 0.5 else "down"
        body += f'<rect class="{state}" x="{x0}" y="{_PAD + 3}" width="{width}" height="{HEIGHT - 2 * _PAD - 6}"/>'
    return _svg(title, body, "state")
