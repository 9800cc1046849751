"""Probe settings and results: what a run was asked to do and what it found (measurements, rank reports, outcome)."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from agent.health.probe_limits import PEER_FAIL, REFERENCE_FAIL, REFERENCE_WARN, THROTTLE_FAIL, THROTTLE_WARN

if TYPE_CHECKING:
    from agent.core.config import Config

PROBES = ("gemm", "allreduce")  # the scheduled probes, whose counters exist from the start
ON_DEMAND_PROBES = ("membw", "h2d", "p2p", "sustained_gemm")  # `npuwatch probe` (and the coming `check`)
OUTCOMES = ("pass", "fail", "timeout", "skipped", "error")
STAGES = ("connect", "exec")

EventHandler = Callable[[dict[str, Any]], None]


@dataclass
class ProbeSettings:
    """How to run probes. ``None`` sizes and counts mean "the worker's default for the backend"."""

    python: str = sys.executable
    backend: Literal["auto", "npu", "cuda", "cpu"] = "auto"
    devices: tuple[int, ...] | None = None  # None: every visible device (cpu: ``cpu_ranks`` ranks)
    cpu_ranks: int = 2
    gemm_size: int | None = None
    gemm_dtypes: tuple[str, ...] | None = None
    allreduce_bytes: int | None = None
    copy_bytes: int | None = None  # membw, h2d, p2p buffer size
    sustained_s: float | None = None  # sustained GEMM: seconds under load
    window_s: float | None = None  # sustained GEMM: seconds per FLOP/s window
    warmup: int | None = None
    warmup_s: float | None = None  # warm-up goes on at least this long (clocks ramp up under load)
    iterations: int | None = None
    repeats: int | None = None  # timed loops of ``iterations``; the fastest one counts
    connect_timeout_s: float = 120.0  # HCCL_CONNECT_TIMEOUT (HCCL default 120 s; minimum 120)
    exec_timeout_s: float = 68.0  # HCCL_EXEC_TIMEOUT (HCCL default 1836 s; minimum 68)
    deadline_s: float = 300.0  # outer watchdog over the whole run
    stall_s: float | None = None  # outer watchdog: no progress this long in connect/exec
    term_grace_s: float = 3.0  # SIGTERM -> SIGKILL
    min_efficiency: float = REFERENCE_FAIL.value  # of a *measured* peak; below fails the probe
    warn_efficiency: float | None = REFERENCE_WARN.value
    min_busbw: float | None = None  # bytes/s; below fails the probe
    warn_busbw: float | None = None
    # membw/h2d/p2p: a device or pair below this share of the median of its kind in the same
    # run fails (one slow link is not averaged away); the expected figures use min_efficiency.
    min_peer_ratio: float = PEER_FAIL.value
    max_throttle_drop: float = THROTTLE_FAIL.value  # sustained GEMM: a window this far below the best one fails
    warn_throttle_drop: float | None = THROTTLE_WARN.value
    peaks: dict[str, dict[str, float]] = field(default_factory=dict)  # model -> dtype -> FLOP/s
    bandwidths: dict[str, dict[str, float]] = field(default_factory=dict)  # model -> kind -> bytes/s
    model: str | None = None  # chip model for efficiency (default: the name torch reports)
    chip_map: dict[int, tuple[int, int]] = field(default_factory=dict)  # device index -> (npu, chip)
    use_lock: bool = True
    lock_path: str | None = None  # None: agent.probes.lock.DEFAULT_LOCK_PATH
    extra_env: dict[str, str] = field(default_factory=dict)
    tag: str | None = None  # put in every worker's argv (--tag) so its processes can be found


@dataclass(frozen=True)
class GemmMeasurement:
    device: int
    npu: int
    chip: int
    model: str
    dtype: str
    size: int
    iterations: int
    seconds: float
    flops: float
    correct: bool
    residual_ratio: float
    peak_flops: float | None = None
    peak_basis: str | None = None
    efficiency: float | None = None


@dataclass(frozen=True)
class AllreduceMeasurement:
    scope: str
    world_size: int
    size_bytes: int
    iterations: int
    seconds_per_iteration: float
    algbw_bytes_per_second: float
    busbw_bytes_per_second: float
    correct: bool


@dataclass(frozen=True)
class BandwidthMeasurement:
    """One cell of a copy probe: a device's memory (membw), one direction of its host link
    (h2d, d2h), or one ordered pair of devices (p2p: ``device`` -> ``peer``)."""

    kind: str  # membw | h2d | d2h | p2p
    device: int
    npu: int
    chip: int
    model: str
    size_bytes: int
    iterations: int
    seconds: float  # the fastest timed loop
    bytes_per_second: float  # membw: read + written; the others: one direction
    correct: bool  # the data arrived intact
    peer: int | None = None
    peer_npu: int | None = None
    peer_chip: int | None = None
    pinned: bool | None = None  # h2d/d2h: page-locked host memory
    expected_bytes_per_second: float | None = None
    expected_basis: str | None = None
    efficiency: float | None = None
    peer_ratio: float | None = None  # over the median of the same kind in this run
    flagged: str | None = None  # why the judging found this cell slow

    @property
    def where(self) -> str:
        if self.peer is not None:
            return f"device {self.device} -> {self.peer}"
        return f"device {self.device}" + ("" if self.kind in ("membw", "p2p") else f" {self.kind}")


@dataclass(frozen=True)
class SustainedWindow:
    index: int
    start_s: float
    seconds: float
    iterations: int
    flops: float
    clock_hz: float | None = None  # absent where the backend cannot read it
    power_watts: float | None = None
    temperature_celsius: float | None = None


@dataclass(frozen=True)
class SustainedGemmMeasurement:
    device: int
    npu: int
    chip: int
    model: str
    dtype: str
    size: int
    duration_s: float
    window_s: float
    windows: list[SustainedWindow]
    best_flops: float
    median_flops: float
    worst_flops: float  # the slowest window after the first
    worst_window: int
    drop_ratio: float  # 1 - worst / best: how far the chip fell under sustained load
    correct: bool
    residual_ratio: float
    peak_flops: float | None = None
    peak_basis: str | None = None
    efficiency: float | None = None  # median window over the peak


@dataclass
class RankReport:
    """What one worker process left behind."""

    index: int
    argv: list[str]
    pid: int
    returncode: int | None = None
    stage: str = "setup"
    result: dict[str, Any] | None = None
    stderr_tail: list[str] = field(default_factory=list)
    killed: bool = False  # by the runner (deadline, or after another rank failed)


@dataclass
class ProbeResult:
    probe: str
    outcome: str
    started_at: float
    duration_s: float
    message: str = ""
    stage: str | None = None  # for timeouts: connect | exec
    backend: str | None = None
    scope: str | None = None
    warnings: list[str] = field(default_factory=list)
    gemm: list[GemmMeasurement] = field(default_factory=list)
    allreduce: AllreduceMeasurement | None = None
    bandwidth: list[BandwidthMeasurement] = field(default_factory=list)
    sustained: list[SustainedGemmMeasurement] = field(default_factory=list)
    ranks: list[RankReport] = field(default_factory=list)

    @property
    def exit_code(self) -> int:
        """Nagios style: 0 pass, 1 pass with warnings, 2 fail or timeout, 3 error or skipped."""
        if self.outcome == "pass":
            return 1 if self.warnings else 0
        return 2 if self.outcome in ("fail", "timeout") else 3

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["exit_code"] = self.exit_code
        return data


def skipped_result(probe: str, reason: str, clock: Callable[[], float] = time.time) -> ProbeResult:
    """A probe that did not run (lock held, devices busy): counted, never a hardware verdict."""
    return ProbeResult(probe=probe, outcome="skipped", started_at=clock(), duration_s=0.0, message=reason)


def settings_from_config(config: Config) -> ProbeSettings:
    """ProbeSettings from a loaded config's ``probes`` section (agent.core.config.Config)."""
    probes = config.probes
    settings = ProbeSettings(
        backend=probes.backend, model=probes.model, lock_path=probes.lock_file,
        connect_timeout_s=probes.connect_timeout, exec_timeout_s=probes.exec_timeout,
        deadline_s=probes.deadline, stall_s=probes.stall,
        peaks={model: dict(per_dtype) for model, per_dtype in (probes.peaks or {}).items()},
        gemm_size=probes.gemm.size, min_efficiency=probes.gemm.min_efficiency,
        allreduce_bytes=probes.allreduce.size, min_busbw=probes.allreduce.min_bus_bandwidth,
    )
    if probes.python:
        settings.python = probes.python
    if probes.gemm.dtypes:
        settings.gemm_dtypes = tuple(probes.gemm.dtypes)
    if probes.allreduce.devices is not None:
        settings.devices = tuple(probes.allreduce.devices)
    return settings
