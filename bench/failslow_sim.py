"""A step-level simulator of a synchronous data/tensor/pipeline-parallel training job, producing per chip the
series the agent exports (docs/failslow.md), as Prometheus would store them after scraping the agents.

Each step every rank waits for its host (data loader), computes, then joins the step's collectives: a ring
(or hierarchical ring) all-reduce that starts when the last rank is ready and runs at the pace of its slowest
link. So a slow rank, node or link slows every rank, and only the signals of the chips themselves say which.

    for line in Simulation(scenario).lines(t0):   # "name{labels} value timestamp_ms", import format
        ...
"""

from __future__ import annotations

import bisect
import math
import random
from array import array
from collections.abc import Iterator
from dataclasses import dataclass

from bench.failslow_scenario import Event, Scenario

__all__ = ["CLOCK_HZ", "ERROR_COUNTER", "Simulation", "chip_of"]

CLOCK_HZ = 1.8e9
ERROR_COUNTER = "roce_new_pkt_rty_num"  # retransmissions, as hccn_tool -stat counts them
PFC_FAULT_PER_COMM_S = 6000.0  # pause frames per second of collective time on a port x (f - 1) / f
RETRY_FAULT_PER_COMM_S = 200.0
HCCS_BYTES_PER_S = 30e9  # tensor-parallel traffic while computing


def chip_of(scenario: Scenario, rank: int) -> tuple[int, int]:
    """(node index, npu) of a rank: ranks fill the nodes in order."""
    return rank // scenario.npus_per_node, rank % scenario.npus_per_node


def node_name(index: int) -> str:
    return f"node-{index:04d}"


@dataclass
class _Steps:
    start: array  # step start times
    ready: array  # when the last rank is ready (the collectives start)
    end: array
    comm_before: array  # collective seconds before each step
    bytes_before: array
    comm_bytes: array  # bytes each port sends in the step
    host: list[array]  # per step, per rank: host wait before computing
    compute: list[array]


class Simulation:
    def __init__(self, scenario: Scenario) -> None:
        self.s = scenario
        self.rng = random.Random(scenario.seed)
        self.steps = self._run()
        self.bursts = self._bursts()

    # ------------------------------------------------------------------ the job, step by step

    def _pause(self, t: float) -> Event | None:
        return next((e for e in self.s.events if e.kind in ("checkpoint", "restart") and e.active(t)), None)

    def _warm(self, t: float) -> bool:
        starts = [0.0, *(e.end for e in self.s.events if e.kind == "restart" and e.end <= t)]
        return t - max(starts) < self.s.warmup_s

    def _run(self) -> _Steps:
        s, rng = self.s, self.rng
        base_c = s.step_s * s.compute_fraction
        base_x = s.step_s * (1.0 - s.compute_fraction)
        line_rate = s.link_bytes_per_s * 0.9
        out = _Steps(array("d"), array("d"), array("d"), array("d"), array("d"), array("d"), [], [])
        last_stage = s.pp - 1
        stage_factor = [1.0 + (s.pp_imbalance if s.pp > 1 and s.stage_of(r) == last_stage else 0.0)
                        for r in range(s.ranks)]
        comm_total = bytes_total = 0.0
        t = 0.0
        while t < s.duration_s:
            paused = self._pause(t)
            if paused is not None:
                t = paused.end
                continue
            active = [e for e in s.events if e.active(t)]
            evaluating = any(e.kind == "eval" for e in active)
            warm = self._warm(t)
            slow = [1.0] * s.ranks
            host = array("d", bytes(8 * s.ranks))
            link = 1.0
            for e in active:
                if e.kind == "compute_slow":
                    for r in e.ranks:
                        slow[r] *= e.factor
                elif e.kind == "host_slow" and e.node is not None:
                    for r in range(e.node * s.npus_per_node, (e.node + 1) * s.npus_per_node):
                        host[r] = max(host[r], (e.factor - 1.0) * base_c)
                elif e.kind == "link_slow":
                    link = max(link, e.factor)
            compute = array("d")
            for r in range(s.ranks):
                c = base_c * stage_factor[r] * slow[r] * max(0.5, 1.0 + rng.gauss(0.0, s.step_jitter))
                if warm:
                    c *= rng.uniform(1.0 - s.warmup_jitter, 1.0 + s.warmup_jitter)
                if evaluating:
                    c *= 0.35  # forward passes only
                compute.append(c)
            ready = max(h + c for h, c in zip(host, compute))
            x = base_x * (0.2 if evaluating else 1.0)
            sent = line_rate * x
            x *= link
            out.start.append(t)
            out.ready.append(t + ready)
            out.end.append(t + ready + x)
            out.comm_before.append(comm_total)
            out.bytes_before.append(bytes_total)
            out.comm_bytes.append(sent)
            out.host.append(host)
            out.compute.append(compute)
            comm_total += x
            bytes_total += sent
            t += ready + x
        return out

    def _bursts(self) -> dict[int, list[tuple[float, float]]]:
        """Transient congestion: per port, bursts of pause frames (not a fault: seconds long)."""
        s, rng = self.s, self.rng
        per_s = s.pfc_bursts_per_port_hour / 3600.0
        out: dict[int, list[tuple[float, float]]] = {}
        for r in range(s.ranks):
            t = rng.expovariate(per_s) if per_s > 0 else math.inf
            while t < s.duration_s:
                out.setdefault(r, []).append((t, t + rng.uniform(1.0, s.pfc_burst_max_s)))
                t += rng.expovariate(per_s)
        return out

    # ------------------------------------------------------------------ what a chip reads at time t

    def _index(self, t: float) -> int:
        """The last step started at or before t (-1: none)."""
        return bisect.bisect_right(self.steps.start, t) - 1

    def busy(self, rank: int, a: float, b: float) -> float:
        """Seconds the rank's AI Cores computed within [a, b]."""
        st = self.steps
        k = max(0, self._index(a))
        total = 0.0
        while k < len(st.start) and st.start[k] < b:
            lo = st.start[k] + st.host[k][rank]
            hi = lo + st.compute[k][rank]
            total += max(0.0, min(hi, b) - max(lo, a))
            k += 1
        return total

    def comm_time(self, t: float) -> float:
        """Collective seconds from the start to t (every port carries every collective)."""
        st = self.steps
        k = self._index(t)
        if k < 0:
            return 0.0
        return st.comm_before[k] + min(max(0.0, t - st.ready[k]), st.end[k] - st.ready[k])

    def sent_bytes(self, t: float) -> float:
        st = self.steps
        k = self._index(t)
        if k < 0:
            return 0.0
        span = st.end[k] - st.ready[k]
        done = min(max(0.0, t - st.ready[k]), span) / span if span > 0 else 1.0
        return st.bytes_before[k] + st.comm_bytes[k] * done

    def _fault_comm(self, e: Event, t: float) -> float:
        if t <= e.start:
            return 0.0
        return self.comm_time(min(t, e.end)) - self.comm_time(e.start)

    def pauses(self, rank: int, t: float) -> tuple[float, float]:
        """(PFC pause frames, retransmissions) the rank's port counted from the start to t."""
        s = self.s
        frames = s.pfc_background_per_s * t
        for lo, hi in self.bursts.get(rank, ()):
            frames += s.pfc_burst_per_s * max(0.0, min(hi, t) - lo)
        retries = 0.0
        for e in s.events:
            if e.kind == "link_slow" and e.pair is not None and e.pair[0] == rank:
                comm = self._fault_comm(e, t)
                frames += PFC_FAULT_PER_COMM_S * (e.factor - 1.0) / e.factor * comm
                retries += RETRY_FAULT_PER_COMM_S * (e.factor - 1.0) / e.factor * comm
        return frames, retries

    def host_cpu(self, node: int, t: float) -> float:
        s, rng = self.s, self.rng
        paused = self._pause(t)
        if paused is not None:
            value = 0.8 if paused.kind == "checkpoint" else 0.1  # serialising the state; nothing running
        elif any(e.kind == "host_slow" and e.node == node and e.active(t) for e in s.events):
            value = 0.97
        else:
            value = s.host_cpu
        return min(1.0, max(0.0, value + rng.gauss(0.0, s.host_cpu_noise if value < 0.9 else 0.01)))

    def running(self, t: float) -> bool:
        return not any(e.kind == "restart" and e.active(t) for e in self.s.events)

    # ------------------------------------------------------------------ the series

    def scrape_times(self, node: int) -> Iterator[float]:
        s = self.s
        rng = random.Random(s.seed * 1_000_003 + node)
        t = rng.uniform(0.0, s.scrape_s)
        while t < s.duration_s:
            if rng.random() >= s.scrape_miss:
                yield max(0.0, t + rng.uniform(-s.scrape_jitter_s, s.scrape_jitter_s))
            t += s.scrape_s

    def lines(self, t0: float) -> Iterator[str]:
        """Every sample, in Prometheus' text import format with millisecond timestamps (from ``t0``)."""
        s = self.s
        window = s.util_window_s
        for node in range(s.nodes):
            base = f'job="npuwatch",instance="10.{node // 250}.{node % 250}.1:9101",node="{node_name(node)}"'
            last = -math.inf
            for t in self.scrape_times(node):
                if t <= last:
                    continue
                last = t
                ms = int((t0 + t) * 1000)
                yield f"npuwatch_host_cpu_utilization_ratio{{{base}}} {self.host_cpu(node, t):.4f} {ms}"
                running = self.running(t)
                sent = self.sent_bytes(t)
                for npu in range(s.npus_per_node):
                    rank = node * s.npus_per_node + npu
                    chip = f'{base},npu="{npu}",chip="0"'
                    busy = self.busy(rank, max(0.0, t - window), t) / window if t > 0 else 0.0
                    util = min(1.0, max(0.0, busy + self.rng.gauss(0.0, s.util_noise)))
                    frames, retries = self.pauses(rank, t)
                    yield f"npu_aicore_utilization_ratio{{{chip}}} {util:.4f} {ms}"
                    yield f"npu_aicore_frequency_hertz{{{chip}}} {CLOCK_HZ:.0f} {ms}"
                    yield f"npu_roce_transmitted_bytes_total{{{chip}}} {int(sent)} {ms}"
                    yield f'npu_roce_pfc_pause_frames_total{{{chip},direction="rx"}} {int(frames)} {ms}'
                    yield f'npu_roce_errors_total{{{chip},counter="{ERROR_COUNTER}"}} {int(retries)} {ms}'
                    if s.tp > 1:
                        yield (f'npu_hccs_bandwidth_bytes_per_second{{{chip},link="0",direction="tx"}} '
                               f"{HCCS_BYTES_PER_S * busy:.0f} {ms}")
                    if running:
                        yield (f'npu_job_info{{{chip},training_job="{s.job}",rank="{rank}",local_rank="{npu}",'
                               f'world_size="{s.ranks}",source="env"}} 1 {ms}')
