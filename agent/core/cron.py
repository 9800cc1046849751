"""Cron expressions for probe schedules: five crontab fields, read in the node's local time zone.

APScheduler 3's ``CronTrigger`` is the cron engine; this module only adapts crontab syntax to it.
Two places differ and are handled here rather than left to surprise an operator:

- day of week: crontab counts 0 (or 7) = Sunday, APScheduler 3 counts 0 = Monday. The weekday
  field is read the crontab way and handed to APScheduler as day names (``mon,wed``);
- day of month *and* day of week both restricted: crontab runs when either matches, APScheduler
  when both do. Such an expression is refused with a message instead of running on other days
  than the operator meant.

The time zone is the node's (``TZ`` or ``/etc/localtime``, through tzlocal, which APScheduler
already depends on): ``0 3 * * *`` means 03:00 on the node's clock, as in the node's crontab.
"""

from __future__ import annotations

import datetime as dt
import re

from apscheduler.triggers.cron import CronTrigger
from tzlocal import get_localzone

__all__ = ["CronError", "cron_trigger", "parse_cron"]

_DAY_NAMES = ("sun", "mon", "tue", "wed", "thu", "fri", "sat")
_DAY_NUMBER_RE = re.compile(r"^[0-7]$")


class CronError(ValueError):
    """A crontab expression npuwatch cannot run as written; the message says why."""


def _weekday(token: str) -> int:
    """A crontab weekday (0-7 or sun..sat) as 0..7, Sunday 0 (7 stays 7 so ranges like 5-7 work)."""
    lowered = token.strip().lower()
    if _DAY_NUMBER_RE.match(lowered):
        return int(lowered)
    if lowered in _DAY_NAMES:
        return _DAY_NAMES.index(lowered)
    raise CronError(f"day of week {token[:20]!r}: expected 0-7 or sun..sat")


def _weekday_names(field: str) -> str:
    """Crontab day-of-week field -> APScheduler day names (``*`` stays ``*``)."""
    if field == "*":
        return "*"
    days: set[int] = set()
    for part in field.split(","):
        span, slash, step_text = part.partition("/")
        step = 1
        if slash:
            if not step_text.isdigit() or int(step_text) == 0:
                raise CronError(f"day of week {part[:20]!r}: the step after '/' must be a positive number")
            step = int(step_text)
        if span == "*":
            low, high = 0, 6
        elif "-" in span:
            first, _, last = span.partition("-")
            low, high = _weekday(first), _weekday(last)
        else:
            low = _weekday(span)
            high = 6 if slash else low
        if low > high:
            raise CronError(f"day of week {part[:20]!r}: the range runs backwards")
        days.update(day % 7 for day in range(low, high + 1, step))
    return ",".join(_DAY_NAMES[day] for day in sorted(days))


def parse_cron(expression: str) -> tuple[str, str, str, str, str]:
    """The five fields, checked; day of week in APScheduler day names. Raises ``CronError``."""
    if not isinstance(expression, str):
        raise CronError("expected a crontab expression like '0 3 * * *'")
    fields = expression.split()
    if len(fields) != 5:
        raise CronError(f"expected 5 fields (minute hour day-of-month month day-of-week), got {len(fields)}")
    minute, hour, day, month, weekday = fields
    if day not in ("*", "?") and weekday not in ("*", "?"):
        raise CronError("set day of month or day of week, not both (crontab would run when either matches, "
                        "the scheduler only when both do)")
    names = _weekday_names("*" if weekday == "?" else weekday)
    day = "*" if day == "?" else day
    try:
        CronTrigger(minute=minute, hour=hour, day=day, month=month, day_of_week=names, timezone=dt.timezone.utc)
    except ValueError as exc:
        raise CronError(str(exc)) from None
    return minute, hour, day, month, names


def cron_trigger(expression: str, jitter_s: float = 0.0, timezone: dt.tzinfo | None = None) -> CronTrigger:
    """An APScheduler trigger for ``expression`` in the node's time zone, with up to ``jitter_s`` of jitter."""
    minute, hour, day, month, weekday = parse_cron(expression)
    return CronTrigger(minute=minute, hour=hour, day=day, month=month, day_of_week=weekday,
                       timezone=timezone or get_localzone(), jitter=int(jitter_s) or None)
