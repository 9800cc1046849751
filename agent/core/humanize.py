"""Numbers as a person writes them: ``1 device`` / ``8 devices``, ``28 h``, ``1.5 MiB``, ``12,345``.

For text meant to be read; JSON and metrics keep their base units.
"""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["count", "duration", "join", "plural", "size"]

_MINUTE = 60.0
_HOUR = 3600.0
_DAY = 86400.0


def count(number: int) -> str:
    """``12,345``: thousands grouped, as a count of lines or bytes reads best."""
    return f"{number:,}"


def plural(number: int, noun: str, many: str | None = None) -> str:
    """``1 device``, ``0 devices``, ``3 devices``; ``many`` for an irregular plural (``1 process``)."""
    word = noun if number == 1 else (many if many is not None else f"{noun}s")
    return f"{count(number)} {word}"


def duration(seconds: float) -> str:
    """``40 ms``, ``0.8 s``, ``45 s``, ``12 min``, ``2 h``, ``1 h 30 min``, ``28 h``, ``3 d 4 h``.

    Seconds show one decimal under 10 s; minutes drop seconds from 10 min on; hours are counted up
    to two days (a window of "28 h" reads better than "1 d 4 h"), days beyond.
    """
    seconds = max(0.0, float(seconds))
    if 0 < seconds < 0.1:
        return f"{max(1, round(seconds * 1000))} ms"
    if seconds < 10:
        return _decimal(seconds) + " s"
    whole = round(seconds)
    if whole < _MINUTE:
        return f"{whole} s"
    if whole < 10 * _MINUTE:
        minutes, rest = divmod(whole, 60)
        return f"{minutes} min {rest} s" if rest else f"{minutes} min"
    minutes = round(whole / _MINUTE)
    if minutes < 60:
        return f"{minutes} min"
    if minutes < 48 * 60:
        hours, rest = divmod(minutes, 60)
        return f"{hours} h {rest} min" if rest else f"{hours} h"
    days, rest = divmod(round(whole / _HOUR), 24)
    return f"{days} d {rest} h" if rest else f"{days} d"


def size(n_bytes: float) -> str:
    """``882 B``, ``1.5 KiB``, ``64 MiB``, ``1.2 GiB`` (binary units, as the config's sizes are written)."""
    value = float(n_bytes)
    if value < 1024:
        return f"{int(value)} B"
    for unit in ("KiB", "MiB", "GiB", "TiB"):
        value /= 1024
        if value < 1024 or unit == "TiB":
            return f"{_decimal(value)} {unit}"
    raise AssertionError("unreachable")


def join(items: Sequence[str], last: str = "and") -> str:
    """``a``, ``a and b``, ``a, b and c``."""
    if len(items) <= 1:
        return "".join(items)
    return f"{', '.join(items[:-1])} {last} {items[-1]}"


def _decimal(value: float) -> str:
    """One decimal, without a trailing ``.0``."""
    text = f"{value:.1f}"
    return text[:-2] if text.endswith(".0") else text
