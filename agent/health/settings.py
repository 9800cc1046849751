"""What the one check set needs from the config and the command line, in one value (``JudgeSettings``).

``check`` and ``diagnose`` build it the same way, so one node read at one moment gets one judgement:
the same look-backs (``window_s`` for the logs, ``flap_window_s`` for link flaps), the same chip count,
thresholds, handling-level table and fault history. Each look-back says where it came from (``*_basis``),
and the output shows it.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from agent.handling.levels import history_of
from agent.health import thresholds as table
from agent.health.thresholds import INCIDENT_LOOK_BACK_S, fault_kind
from collectors.fault_levels import FaultTable, default_table

if TYPE_CHECKING:
    from agent.core.config import Config

__all__ = ["JudgeSettings"]


@dataclass(frozen=True)
class JudgeSettings:
    expected_chips: int = 0
    window_s: float = INCIDENT_LOOK_BACK_S  # the logs' look-back (hccl_errors)
    window_basis: str = "the thresholds table"
    flap_window_s: float = float(fault_kind("link_flap").window_s or 0.0)
    flap_window_basis: str = "the thresholds table"
    max_isolated_pages: int = int(fault_kind("hbm_pages_over").threshold or 0)
    max_isolated_pages_basis: str = "the thresholds table"
    max_temperature: float = float(fault_kind("chip_too_hot").threshold or 0.0)
    max_temperature_basis: str = "the thresholds table"
    expected_driver: str | None = None
    expected_firmware: str | None = None
    hccn_conf: str = "/etc/hccn.conf"
    fault_table: FaultTable = field(default_factory=default_table)
    fault_history: str | None = None  # the agent's <state_dir>/fault_history.json: held separations, escalation

    @classmethod
    def from_config(cls, config: Config) -> JudgeSettings:
        check = config.check
        window = check.hccl_window
        hot = check.max_temperature
        return cls(
            expected_chips=int(config.expected_chips),
            window_s=table.log_window_s(config),
            window_basis="config check.hccl_window" if window is not None else "the thresholds table",
            flap_window_s=table.flap_window_s(config),
            flap_window_basis="config check.flap_window" if check.flap_window is not None else "the thresholds table",
            max_isolated_pages=table.max_isolated_pages(config),
            max_isolated_pages_basis=("config check.max_isolated_pages" if check.max_isolated_pages is not None
                                      else "the thresholds table"),
            max_temperature=float(hot) if hot is not None else float(fault_kind("chip_too_hot").threshold or 0.0),
            max_temperature_basis="config check.max_temperature" if hot is not None else "the thresholds table",
            expected_driver=check.expected_driver,
            expected_firmware=check.expected_firmware,
            hccn_conf=str(config.collectors.hccn_tool.hccn_conf),
            fault_table=table.fault_table(config),
            fault_history=str(history_of(config).path),
        )

    def with_windows(self, window_s: float | None = None, flap_window_s: float | None = None) -> JudgeSettings:
        """These settings with the look-backs a command line gave (``--window``, ``--flap-window``)."""
        settings = self
        if window_s is not None:
            settings = replace(settings, window_s=float(window_s), window_basis="--window")
        if flap_window_s is not None:
            settings = replace(settings, flap_window_s=float(flap_window_s), flap_window_basis="--flap-window")
        return settings
