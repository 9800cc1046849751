"""The few PromQL functions the predictive alerts use, evaluated in Python as Prometheus 2.x does.

For tests that hold a scraped series history (one sample list per series) against an alert's own
parameters without a Prometheus: ``rate``/``increase`` with Prometheus' extrapolation to the window
edges, ``predict_linear`` (least squares, intercept at the evaluation time), subqueries
(``f(...)[range:step]``, steps aligned to multiples of ``step``) and the ``for:`` of a rule.
Windows include both ends (``[t - range, t]``), as in Prometheus 2.x; an instant selector takes the
newest sample at most 5 minutes old.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

__all__ = ["LOOKBACK_S", "Samples", "first_firing", "increase", "instant", "predict_linear", "rate", "subquery",
           "window"]

Samples = Sequence[tuple[float, float]]  # (time in seconds, value), oldest first
LOOKBACK_S = 300.0


def window(samples: Samples, at: float, range_s: float) -> list[tuple[float, float]]:
    return [(t, v) for t, v in samples if at - range_s <= t <= at]


def instant(samples: Samples, at: float) -> float | None:
    recent = window(samples, at, LOOKBACK_S)
    return recent[-1][1] if recent else None


def _extrapolated(samples: Samples, at: float, range_s: float, *, per_second: bool) -> float | None:
    points = window(samples, at, range_s)
    if len(points) < 2:
        return None
    first_t, first_v = points[0]
    last_t, last_v = points[-1]
    result = last_v - first_v
    for (_, before), (_, after) in zip(points, points[1:]):
        if after < before:  # a counter reset
            result += before
    sampled = last_t - first_t
    average = sampled / (len(points) - 1)
    to_start = first_t - (at - range_s)
    to_end = at - last_t
    if result > 0 and first_v >= 0:
        to_start = min(to_start, sampled * (first_v / result))
    threshold = average * 1.1
    interval = sampled
    interval += to_start if to_start < threshold else average / 2
    interval += to_end if to_end < threshold else average / 2
    result *= interval / sampled
    return result / range_s if per_second else result


def rate(samples: Samples, at: float, range_s: float) -> float | None:
    return _extrapolated(samples, at, range_s, per_second=True)


def increase(samples: Samples, at: float, range_s: float) -> float | None:
    return _extrapolated(samples, at, range_s, per_second=False)


def predict_linear(points: Samples, at: float, horizon_s: float) -> float | None:
    """The least-squares line through ``points`` (already a window), read ``horizon_s`` after ``at``."""
    if len(points) < 2:
        return None
    xs = [t - at for t, _ in points]
    ys = [v for _, v in points]
    n = len(points)
    mean_x, mean_y = sum(xs) / n, sum(ys) / n
    cov = sum((x - mean_x) * (y - mean_y) for x, y in zip(xs, ys))
    var = sum((x - mean_x) ** 2 for x in xs)
    slope = cov / var if var else 0.0
    intercept = mean_y - slope * mean_x
    return intercept + slope * horizon_s


def subquery(
    inner: Callable[[float], float | None], at: float, range_s: float, step_s: float
) -> list[tuple[float, float]]:
    """``inner`` evaluated at every multiple of ``step_s`` in ``[at - range_s, at]`` (no value: no point)."""
    start = (at - range_s) // step_s * step_s
    if start < at - range_s:
        start += step_s
    out = []
    t = start
    while t <= at:
        value = inner(t)
        if value is not None:
            out.append((t, value))
        t += step_s
    return out


def first_firing(condition: Callable[[float], bool], times: Sequence[float], for_s: float) -> float | None:
    """The first evaluation time at which a rule with this condition and ``for:`` fires (None: never)."""
    pending_since: float | None = None
    for t in times:
        if not condition(t):
            pending_since = None
            continue
        if pending_since is None:
            pending_since = t
        if t - pending_since >= for_s:
            return t
    return None
