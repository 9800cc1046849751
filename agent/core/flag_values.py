"""Durations and sizes on the command line: one parser for every flag that takes one.

A flag declares its kind by its metavar (``DURATION`` or ``SIZE``); ``type_value_flags(parser)``
gives every such flag, in every subcommand, the matching type (one that must be above zero says
``type=positive_duration_flag`` itself). argparse then names the option in
its error (``argument --interval: expected a duration ...``), and a string default goes through the
same parser, so a command always receives seconds (float) or bytes (int).
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

from agent.core.config_values import parse_duration, parse_size, split_listen_address

__all__ = ["DURATION_FORMAT", "SIZE_FORMAT", "duration_flag", "listen_address_flag", "positive_duration_flag",
           "size_flag", "type_value_flags"]

DURATION_FORMAT = "seconds, or a number with a unit: 500ms, 90s, 15m, 2h, 1d"
SIZE_FORMAT = "bytes, or a number with a unit: 64KiB, 512MiB, 2GiB (also KB, MB, GB, TB; no space)"


def duration_flag(text: str) -> float:
    """``2s``, ``90m``, ``7200`` -> seconds; argparse adds the option's name to the error."""
    try:
        return parse_duration(text.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a duration ({DURATION_FORMAT}), got {text!r}") from None


def positive_duration_flag(text: str) -> float:
    """A duration above zero (a deadline, a timeout)."""
    seconds = duration_flag(text)
    if seconds <= 0:
        raise argparse.ArgumentTypeError(f"expected a duration above zero ({DURATION_FORMAT}), got {text!r}")
    return seconds


def size_flag(text: str) -> int:
    """``512MiB``, ``4096`` -> bytes."""
    try:
        return parse_size(text.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a size ({SIZE_FORMAT}), got {text!r}") from None


def listen_address_flag(text: str) -> tuple[str, int | None]:
    """``--web.listen-address``: ``0.0.0.0``, ``:9611``, ``host:9611``, ``[::1]:9611`` -> (host, port or None)."""
    try:
        return split_listen_address(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


_BY_METAVAR: dict[str, Callable[[str], Any]] = {"DURATION": duration_flag, "SIZE": size_flag}
_OURS = frozenset({duration_flag, positive_duration_flag, size_flag})


def type_value_flags(parser: argparse.ArgumentParser) -> None:
    """Every ``DURATION``/``SIZE`` flag of ``parser`` and its subcommands parsed by the functions above."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for child in action.choices.values():
                type_value_flags(child)
            continue
        kind = _BY_METAVAR.get(action.metavar) if isinstance(action.metavar, str) else None
        if kind is not None and action.type not in _OURS:  # a flag that chose positive_duration_flag keeps it
            action.type = kind
