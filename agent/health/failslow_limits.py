"""The fail-slow limits: every number the fleet's fail-slow rules hold a training job's ranks to.

``alerts/failslow.rules.yml`` is generated from these (``python -m alerts.generate``, from the hand-written
expressions of ``alerts/failslow.rules.in.yml``, where each number is a ``<<field>>`` placeholder), and the
``job_straggler`` entry of the fault registry (``agent.health.thresholds``) carries them as ``fleet_limits``
and states its threshold from them; docs/failslow.md says why each has its value.

A field in seconds (``unit`` ``s`` in its metadata) is written as a duration (``30s``, ``10m``); every other
one as a number. Busy fractions and CPU use are ratios (0-1); ``_per_s`` is a rate per second. The recorded
series keep their names (``avg30s``, ``min35s``, ``rate45s``, ``avg15s``, ``fourth``) whatever the windows:
dashboards, the runbook and the benches name them.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any

__all__ = ["FAILSLOW_LIMITS", "FailSlowLimits", "duration_fields"]


def _seconds(default: int) -> Any:
    return field(default=default, metadata={"unit": "s"})


@dataclass(frozen=True)
class FailSlowLimits:
    # How often the rule group is evaluated (its ``interval:``).
    evaluation_interval_s: int = _seconds(10)

    # compute: a chip busy while its peers wait. Its AI Core busy fraction, averaged over the window, compared
    # with the same job's chips on its node.
    compute_window_s: int = _seconds(30)
    compute_above_node_median_ratio: float = 0.04  # above its node's median chip of the job
    # And this many of the job's MADs (the deviations pooled over the job): about 4.7 standard deviations of a
    # chip's 30 s mean. At 6 (about 4) noise alone paged 4 times in 2,386 soak node-days, every time on a node of
    # 8 chips, whose 4th busiest chip sits near its median and adds no margin (bench/failslow_soak.py).
    compute_job_mads: float = 7
    # A node may hold several pipeline stages; the chip must also be above its node's Nth busiest chip of the job
    # (a busier stage of N chips or more is not busier than itself).
    compute_node_nth_busiest: int = 4
    compute_above_nth_busiest_ratio: float = 0.02
    # And this many MADs above it: a chip of another stage beside the last stage's is above its median by more,
    # and above the busier stage by less than its slowdown (``stages-in-node-128``: 1.3x is 7 MADs above it).
    compute_above_nth_busiest_mads: float = 6
    compute_min_chips_per_node: int = 4  # the job's chips on the node, for a comparison at all
    # The job computes (not in a checkpoint, an evaluation or a restart): its median node's median chip busier
    # than this. The compute and host rules hold it.
    job_median_busy_min_ratio: float = 0.1

    # link: a port pausing or retrying, compared with the other ports of its node.
    # The lowest pause-frame rate over this window: 4 evaluations at 10 s. Never a whole number of evaluation
    # intervals: such a range holds one more evaluation on Prometheus 2 than on VictoriaMetrics or Prometheus 3.
    link_pause_window_s: int = _seconds(35)
    link_pause_frames_min_per_s: float = 50
    link_pause_node_median_factor: float = 5  # over this many times the node's median port
    link_pause_node_mads: float = 10  # plus this many of the node's MADs
    # Retransmissions, and the job's traffic, as rates over this window.
    link_rate_window_s: int = _seconds(45)
    link_retransmissions_min_per_s: float = 1
    link_retransmissions_node_median_factor: float = 5
    # The job communicates: its median port sends more than this.
    link_job_sent_min_bytes_per_s: float = 1e6

    # host: the node feeding its chips late. Its host CPU use, averaged over the window, compared with the job's
    # other nodes.
    host_window_s: int = _seconds(15)
    host_above_job_median_ratio: float = 0.2
    host_job_mads: float = 6
    host_cpu_min_ratio: float = 0.8
    host_min_nodes: int = 4  # the job's nodes, for a comparison at all

    # The page: the condition holds this long before NPUJobStraggler fires (the rule's ``for:``).
    alert_for_s: int = _seconds(30)

    def __post_init__(self) -> None:
        for item in fields(self):
            value = getattr(self, item.name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
                raise ValueError(f"FailSlowLimits.{item.name} = {value!r}: a positive number")
            if item.metadata.get("unit") == "s" and int(value) != value:
                raise ValueError(f"FailSlowLimits.{item.name} = {value!r}: a whole number of seconds")
        if self.link_pause_window_s % self.evaluation_interval_s == 0:
            raise ValueError(f"FailSlowLimits.link_pause_window_s = {self.link_pause_window_s}: a whole number of "
                             "evaluation intervals holds one more evaluation on Prometheus 2 than elsewhere")

    @property
    def link_pause_evaluations(self) -> int:
        """How many evaluations the pause window holds: the port pauses at each of them."""
        return -(-self.link_pause_window_s // self.evaluation_interval_s)

    @property
    def threshold(self) -> str:
        """The fault registry's words for what a rank is held to."""
        text = f"the job's median and {self.compute_job_mads:g} MADs"
        others = []
        if self.compute_above_nth_busiest_mads != self.compute_job_mads:
            others.append(f"{self.compute_above_nth_busiest_mads:g} above the node's "
                          f"{_ordinal(self.compute_node_nth_busiest)} busiest chip")
        if self.host_job_mads != self.compute_job_mads:
            others.append(f"{self.host_job_mads:g} for a host")
        return text + (f" ({'; '.join(others)})" if others else "")


def _ordinal(n: int) -> str:
    return f"{n}{'th' if 10 <= n % 100 <= 20 else {1: 'st', 2: 'nd', 3: 'rd'}.get(n % 10, 'th')}"


def duration_fields() -> frozenset[str]:
    """The fields in seconds, written as durations."""
    return frozenset(item.name for item in fields(FailSlowLimits) if item.metadata.get("unit") == "s")


FAILSLOW_LIMITS = FailSlowLimits()
