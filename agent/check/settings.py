"""What a check run needs from the config (``check.*``) and the command line, in one value."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from agent.check.references import Thresholds
from agent.handling.levels import history_of
from agent.health import thresholds as table
from agent.health.thresholds import threshold_of
from collectors.fault_levels import FaultTable, default_table

__all__ = ["CheckSettings"]


def _plain(value: Any) -> dict[str, dict[str, float]]:
    if value is None:
        return {}
    if hasattr(value, "to_dict"):
        value = value.to_dict()
    return {str(model): {str(k): float(v) for k, v in entries.items()} for model, entries in value.items()}


@dataclass(frozen=True)
class CheckSettings:
    expected_chips: int = 0
    tool_timeout_s: float = 4.0
    max_parallel: int = 4
    flap_window_s: float = float(threshold_of("link_flap").window_s or 0.0)
    flap_window_basis: str = "the thresholds table"
    hccl_window_s: float = 3600.0
    max_isolated_pages: int = int(threshold_of("hbm_pages_over").threshold or 0)
    max_isolated_pages_basis: str = "the thresholds table"
    expected_driver: str | None = None
    expected_firmware: str | None = None
    skip: tuple[str, ...] = ()
    hccn_conf: str = "/etc/hccn.conf"
    references: Mapping[str, Mapping[str, float]] = field(default_factory=dict)
    peaks: Mapping[str, Mapping[str, float]] = field(default_factory=dict)
    thresholds: Thresholds = field(default_factory=Thresholds)
    fault_table: FaultTable = field(default_factory=default_table)
    fault_history: str | None = None  # the agent's <state_dir>/fault_history.json: its held separations
    max_temperature: float = 95.0
    sustained_s: float | None = None  # None: the worker's default for the backend
    max_throttle_drop: float = 0.15
    warn_throttle_drop: float = 0.05
    min_peer_ratio: float = 0.75
    copy_bytes: int | None = None
    idle_aicore_threshold: float = 0.05
    min_bus_bandwidth: float | None = None

    @classmethod
    def from_config(cls, config: Any) -> CheckSettings:
        check = config.check
        return cls(
            expected_chips=int(config.expected_chips),
            tool_timeout_s=float(check.tool_timeout),
            max_parallel=int(check.max_parallel),
            flap_window_s=table.flap_window_s(config),
            flap_window_basis="config check.flap_window" if check.flap_window is not None else "the thresholds table",
            hccl_window_s=float(check.hccl_window),
            max_isolated_pages=table.max_isolated_pages(config),
            max_isolated_pages_basis=("config check.max_isolated_pages" if check.max_isolated_pages is not None
                                      else "the thresholds table"),
            expected_driver=check.expected_driver,
            expected_firmware=check.expected_firmware,
            skip=tuple(check.skip),
            hccn_conf=str(config.collectors.hccn_tool.hccn_conf),
            fault_table=table.fault_table(config),
            fault_history=str(history_of(config).path),
            references=_plain(check.references),
            peaks=_plain(config.probes.peaks),
            thresholds=Thresholds(
                fail_ratio=float(check.fail_ratio), warn_ratio=float(check.warn_ratio),
                fleet_fail_ratio=float(check.fleet_fail_ratio), fleet_warn_ratio=float(check.fleet_warn_ratio),
                fleet_min_nodes=int(check.fleet_min_nodes)),
            max_temperature=float(check.max_temperature),
            sustained_s=float(check.sustained_duration) if check.sustained_duration is not None else None,
            max_throttle_drop=float(check.max_throttle_drop),
            warn_throttle_drop=float(check.warn_throttle_drop),
            min_peer_ratio=float(check.min_peer_ratio),
            copy_bytes=int(check.copy_size) if check.copy_size is not None else None,
            idle_aicore_threshold=float(config.probes.idle_aicore_threshold),
            min_bus_bandwidth=config.probes.allreduce.min_bus_bandwidth,
        )
