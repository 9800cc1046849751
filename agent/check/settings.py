"""What a check run needs from the config (``check.*``) and the command line, in one value."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from agent.check.references import Thresholds
from agent.health.probe_limits import PEER_FAIL, THROTTLE_FAIL, THROTTLE_WARN
from agent.health.settings import JudgeSettings

if TYPE_CHECKING:
    from agent.core.config import Config

__all__ = ["CheckSettings"]


def _plain(value: Mapping[str, Mapping[str, float]] | None) -> dict[str, dict[str, float]]:
    if value is None:
        return {}
    return {str(model): {str(k): float(v) for k, v in entries.items()} for model, entries in value.items()}


@dataclass(frozen=True)
class CheckSettings:
    judging: JudgeSettings = field(default_factory=JudgeSettings)  # the node checks' (agent.health.settings)
    tool_timeout_s: float = 4.0
    max_parallel: int = 4
    skip: tuple[str, ...] = ()
    references: Mapping[str, Mapping[str, float]] = field(default_factory=dict)
    peaks: Mapping[str, Mapping[str, float]] = field(default_factory=dict)
    thresholds: Thresholds = field(default_factory=Thresholds)
    sustained_s: float | None = None  # None: the worker's default for the backend
    max_throttle_drop: float = THROTTLE_FAIL.value
    warn_throttle_drop: float = THROTTLE_WARN.value
    min_peer_ratio: float = PEER_FAIL.value
    copy_bytes: int | None = None
    idle_aicore_threshold: float = 0.05
    min_bus_bandwidth: float | None = None

    @classmethod
    def from_config(cls, config: Config) -> CheckSettings:
        check = config.check
        return cls(
            judging=JudgeSettings.from_config(config),
            tool_timeout_s=float(check.tool_timeout),
            max_parallel=int(check.max_parallel),
            skip=tuple(check.skip),
            references=_plain(check.references),
            peaks=_plain(config.probes.peaks),
            thresholds=Thresholds(
                fail_ratio=float(check.fail_ratio), warn_ratio=float(check.warn_ratio),
                fleet_fail_ratio=float(check.fleet_fail_ratio), fleet_warn_ratio=float(check.fleet_warn_ratio),
                fleet_min_nodes=int(check.fleet_min_nodes)),
            sustained_s=float(check.sustained_duration) if check.sustained_duration is not None else None,
            max_throttle_drop=float(check.max_throttle_drop),
            warn_throttle_drop=float(check.warn_throttle_drop),
            min_peer_ratio=float(check.min_peer_ratio),
            copy_bytes=int(check.copy_size) if check.copy_size is not None else None,
            idle_aicore_threshold=float(config.probes.idle_aicore_threshold),
            min_bus_bandwidth=config.probes.allreduce.min_bus_bandwidth,
        )
