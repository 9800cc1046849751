"""The look-back flags every command that judges a node takes: ``--window`` (the logs) and ``--flap-window``
(link flaps), with one meaning and one default everywhere (``agent.health.settings``)."""

from __future__ import annotations

import argparse

from agent.core.config_values import parse_duration
from agent.core.humanize import duration
from agent.health.thresholds import INCIDENT_LOOK_BACK_S, fault_kind

__all__ = ["add_window_arguments", "duration_flag"]


def duration_flag(text: str) -> float:
    """``7200``, ``90m``, ``2h``: seconds, for a flag."""
    try:
        return parse_duration(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a duration (seconds, or 500ms, 90s, 15m, 2h, 1d)") from None


duration_flag.__name__ = "duration"


def add_window_arguments(parser: argparse.ArgumentParser, *, flaps: bool = True) -> None:
    parser.add_argument("--window", type=duration_flag, metavar="DURATION",
                        help="how far back HCCL/CANN log errors count: seconds or 90m, 2h, 1d (default "
                             f"check.hccl_window, else {duration(INCIDENT_LOOK_BACK_S)})")
    if flaps:
        parser.add_argument("--flap-window", dest="flap_window", type=duration_flag, metavar="DURATION",
                            help="how far back RoCE link-downs count as flaps (default check.flap_window, else "
                                 f"{duration(float(fault_kind('link_flap').window_s or 0))})")
