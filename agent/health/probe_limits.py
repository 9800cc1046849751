"""The probe limits: what a probe's or a medium/long check's measurement is held to, defined once.

The config's defaults (``probes.gemm.min_efficiency``, ``check.*_ratio``, ``check.*_throttle_drop``,
``check.fleet_min_nodes``), the probe settings' (``agent.probes.records.ProbeSettings``), check's
references (``agent.check.references.Thresholds``) and triage's reading of the GEMM efficiency series
are these values; ``npuwatch probe --help`` prints them. The alert rules cannot import them:
tests/unit/test_probe_limits.py finds each limit's comparison in the rule its alert reads (by alert
name, through the recording rules) and fails when the two differ.

A measurement past a FAIL limit is the fault kind ``probe_failed``, past a WARN limit ``probe_slow``
(``agent.health.thresholds``). This module imports nothing of the repository: the config and the
probes, which sit below ``agent.health``, read it as a leaf (docs/architecture.md).
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["ALLREDUCE_CLUSTER_FLOOR", "ALLREDUCE_FLEET_FAIL", "ALLREDUCE_NODE_FLOOR", "CLOCK_WARN", "FLEET_FAIL",
           "FLEET_MIN_NODES", "FLEET_WARN", "PEER_FAIL", "PROBE_LIMITS", "REFERENCE_FAIL", "REFERENCE_WARN",
           "THROTTLE_FAIL", "THROTTLE_WARN", "LimitAlert", "ProbeLimit"]


@dataclass(frozen=True)
class LimitAlert:
    """Where an alert rule holds a limit: the rule ``alert`` (with ``labels``, which tell same-named rules apart)
    compares ``metric``, or a series recorded from it, carrying ``selector`` when given, with the limit."""

    alert: str
    metric: str
    labels: tuple[tuple[str, str], ...] = ()
    selector: str = ""  # a matcher of the compared series: 'scope="node"'


@dataclass(frozen=True)
class ProbeLimit:
    name: str
    value: float
    op: str  # a measurement ``op value`` is past the limit: "<" (too slow) or ">" (fell too far)
    kind: str  # the fault kind past it: probe_failed (FAIL) or probe_slow (WARN)
    held: str  # what is compared with the value
    config: tuple[str, ...] = ()  # the config keys whose default it is
    alerts: tuple[LimitAlert, ...] = ()
    note: str = ""  # where the agent and an alert hold different numbers, why


_PROBE_SLOW_ALERT = ("the per-chip alerts page a slow GEMM as a warning after two hourly runs: one slow run "
                     "of a busy node is not a fault")
REFERENCE_FAIL = ProbeLimit(
    "reference_fail", 0.8, "<", "probe_failed",
    "a GEMM FLOP/s or copy bandwidth over its reference figure (a measured peak, check.references)",
    ("probes.gemm.min_efficiency", "check.fail_ratio"),
    (LimitAlert("NPUGEMMProbeSlow", "npu_probe_gemm_efficiency_ratio", (("reference", "peak"),)),
     LimitAlert("NPUGEMMFleetBelowPeak", "npu_probe_gemm_efficiency_ratio")),
    _PROBE_SLOW_ALERT)
REFERENCE_WARN = ProbeLimit(
    "reference_warn", 0.9, "<", "probe_slow", "the same share, under which a probe or check warns",
    ("check.warn_ratio",), note="no alert: a warning is the probe's and check's own")
FLEET_FAIL = ProbeLimit(
    "fleet_fail", 0.85, "<", "probe_failed", "a measurement over the fleet median of its chip model",
    ("check.fleet_fail_ratio",),
    (LimitAlert("NPUGEMMProbeSlow", "npu_probe_gemm_flops", (("reference", "fleet_median"),)),),
    _PROBE_SLOW_ALERT)
FLEET_WARN = ProbeLimit(
    "fleet_warn", 0.92, "<", "probe_slow", "the same share, under which check warns", ("check.fleet_warn_ratio",),
    note="no alert: a warning is check's own")
ALLREDUCE_FLEET_FAIL = ProbeLimit(
    "allreduce_fleet_fail", 0.8, "<", "probe_failed",
    "a node's all-reduce bus bandwidth over the live fleet median of its scope and message size",
    alerts=(LimitAlert("NPUAllReduceBandwidthLow", "npu_probe_allreduce_bus_bandwidth_bytes_per_second",
                       (("reference", "fleet_median"),)),),
    note="the alert's own: check's allreduce is held to fleet_fail of a baseline's median instead")
_FLOOR_NOTE = ("the alert's own: probes.allreduce.min_bus_bandwidth has no default, since the right floor "
               "depends on the node's chips and topology; the alert's floors are far under any healthy node")
ALLREDUCE_NODE_FLOOR = ProbeLimit(
    "allreduce_node_floor", 10e9, "<", "probe_failed", "a node all-reduce's bus bandwidth, in bytes/s",
    alerts=(LimitAlert("NPUAllReduceBandwidthLow", "npu_probe_allreduce_bus_bandwidth_bytes_per_second",
                       (("reference", "floor"),), 'scope="node"'),),
    note=_FLOOR_NOTE)
ALLREDUCE_CLUSTER_FLOOR = ProbeLimit(
    "allreduce_cluster_floor", 5e9, "<", "probe_failed", "a cluster all-reduce's bus bandwidth, in bytes/s",
    alerts=(LimitAlert("NPUAllReduceBandwidthLow", "npu_probe_allreduce_bus_bandwidth_bytes_per_second",
                       (("reference", "floor"),), 'scope="cluster"'),),
    note=_FLOOR_NOTE)
PEER_FAIL = ProbeLimit(
    "peer_fail", 0.75, "<", "probe_failed",
    "a copy bandwidth over the median of the same kind in the same run (membw, h2d, d2h, p2p)",
    ("check.min_peer_ratio",), note="no alert: the copy probes run only under `npuwatch probe` and check")
THROTTLE_FAIL = ProbeLimit(
    "throttle_fail", 0.15, ">", "probe_failed", "sustained GEMM: how far the slowest window falls under the best",
    ("check.max_throttle_drop",), note="no alert: the sustained GEMM runs only under `npuwatch probe` and check")
THROTTLE_WARN = ProbeLimit(
    "throttle_warn", 0.05, ">", "probe_slow", "the same drop, over which it warns", ("check.warn_throttle_drop",),
    note="no alert: the sustained GEMM runs only under `npuwatch probe` and check")
CLOCK_WARN = ProbeLimit(
    "clock_warn", 0.9, "<", "probe_slow", "sustained GEMM: a busy chip's AI Core clock over its rated clock",
    note="no alert: the sustained GEMM runs only under `npuwatch probe` and check")
# A fleet median over fewer nodes is no reference (``check.fleet_min_nodes``).
FLEET_MIN_NODES = 5

PROBE_LIMITS: dict[str, ProbeLimit] = {limit.name: limit for limit in (
    REFERENCE_FAIL, REFERENCE_WARN, FLEET_FAIL, FLEET_WARN, ALLREDUCE_FLEET_FAIL, ALLREDUCE_NODE_FLOOR,
    ALLREDUCE_CLUSTER_FLOOR, PEER_FAIL, THROTTLE_FAIL, THROTTLE_WARN, CLOCK_WARN)}
