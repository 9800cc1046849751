"""The look-back flags every command that judges a node takes: ``--window`` (the logs) and ``--flap-window``
(link flaps), with one meaning and one default everywhere (``agent.health.settings``). Their values are
parsed by the one duration parser of the command line (``agent.core.flag_values``, by metavar)."""

from __future__ import annotations

import argparse

from agent.core.humanize import duration
from agent.health.thresholds import INCIDENT_LOOK_BACK_S, fault_kind

__all__ = ["add_window_arguments"]


def add_window_arguments(parser: argparse.ArgumentParser, *, flaps: bool = True) -> None:
    parser.add_argument("--window", metavar="DURATION",
                        help="how far back HCCL/CANN log errors count: seconds or 90m, 2h, 1d (default "
                             f"check.hccl_window, else {duration(INCIDENT_LOOK_BACK_S)})")
    if flaps:
        parser.add_argument("--flap-window", dest="flap_window", metavar="DURATION",
                            help="how far back RoCE link-downs count as flaps (default check.flap_window, else "
                                 f"{duration(float(fault_kind('link_flap').window_s or 0))})")
