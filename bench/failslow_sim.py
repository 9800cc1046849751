"""A step-level simulator of a synchronous data/tensor/pipeline-parallel training job, producing per chip the
series the agent exports (docs/failslow.md), as Prometheus would store them after scraping the agents.

Each step every rank waits for its host (data loader), computes, then joins the step's collectives: a ring
(or hierarchical ring) all-reduce that starts when the last rank is ready and runs at the pace of its slowest
link. So a slow rank, node or link slows every rank, and only the signals of the chips themselves say which.

    for line in Simulation(scenario).lines(t0):   # "name{labels} value timestamp_ms", import format
        ...
    for line in Simulation(scenario).json_lines(t0):   # VictoriaMetrics' /api/v1/import, a series a line
        ...

Vectorised over ranks with numpy, and streamed: the steps are drawn in blocks over the spans where the job's
conditions hold still (between events and warm-up ends), and the series are produced for one chunk of time
(``chunk_s``) after another, keeping only the steps that chunk reads, so memory stays bounded for a day-long
job of 1,024 ranks. The point queries (``busy``, ``pauses``, ...) keep every step: for tests and small runs.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

import numpy as np

from bench.failslow_scenario import Event, Scenario

__all__ = ["CLOCK_HZ", "ERROR_COUNTER", "METRICS", "Chunk", "Simulation", "chip_of", "node_name"]

CLOCK_HZ = 1.8e9
ERROR_COUNTER = "roce_new_pkt_rty_num"  # retransmissions, as hccn_tool -stat counts them
PFC_FAULT_PER_COMM_S = 6000.0  # pause frames per second of collective time on a port x (f - 1) / f
RETRY_FAULT_PER_COMM_S = 200.0
HCCS_BYTES_PER_S = 30e9  # tensor-parallel traffic while computing
MAX_BLOCK = 1024  # steps drawn at once
METRICS = ("npuwatch_host_cpu_utilization_ratio", "npu_aicore_utilization_ratio", "npu_aicore_frequency_hertz",
           "npu_roce_transmitted_bytes_total", "npu_roce_pfc_pause_frames_total", "npu_roce_errors_total",
           "npu_hccs_bandwidth_bytes_per_second", "npu_job_info")
_RATIOS = ("npu_aicore_utilization_ratio", "npuwatch_host_cpu_utilization_ratio")


def chip_of(scenario: Scenario, rank: int) -> tuple[int, int]:
    """(node index, npu) of a rank: ranks fill the nodes in order."""
    return rank // scenario.npus_per_node, rank % scenario.npus_per_node


def node_name(index: int) -> str:
    return f"node-{index:04d}"


@dataclass
class _Block:
    """Consecutive steps under one set of conditions; per-rank arrays are (steps, ranks)."""
    start: np.ndarray
    ready: np.ndarray  # when the last rank is ready (the collectives start)
    end: np.ndarray
    comm_before: np.ndarray  # collective seconds before each step
    bytes_before: np.ndarray
    comm_bytes: np.ndarray  # bytes each port sends in the step
    lo: np.ndarray  # when each rank starts computing (after its host)
    compute: np.ndarray
    busy_before: np.ndarray  # each rank's compute seconds before the step


def _join(blocks: list[_Block]) -> _Block:
    if len(blocks) == 1:
        return blocks[0]
    return _Block(*(np.concatenate([getattr(b, f) for b in blocks]) for f in _Block.__dataclass_fields__))


@dataclass
class Chunk:
    """The readings of one chunk of time: per node the scrape times and a mask of the scrapes kept, per chip
    (node, npu, scrape) the values."""
    times: np.ndarray  # (nodes, scrapes), seconds from the start
    kept: np.ndarray  # (nodes, scrapes) bool
    host_cpu: np.ndarray  # (nodes, scrapes)
    running: np.ndarray  # (nodes, scrapes) bool: the job exists (npu_job_info)
    sent: np.ndarray  # (nodes, scrapes) bytes each port sent
    util: np.ndarray  # (nodes, npus, scrapes)
    busy: np.ndarray  # (nodes, npus, scrapes) busy share of the window, before noise
    frames: np.ndarray  # (nodes, npus, scrapes)
    retries: np.ndarray


class Simulation:
    def __init__(self, scenario: Scenario, node_base: int = 0, chunk_s: float = 1800.0) -> None:
        """``node_base``: the first node's number in the names (node-0000 ...), so that several jobs can share a
        store; ``chunk_s``: the span of time produced at once."""
        self.s = scenario
        self.node_base = node_base
        self.chunk_s = chunk_s
        steps, bursts, scrapes, readings = np.random.SeedSequence(int(scenario.seed)).spawn(4)
        self._step_seed = steps
        self._scrape_rng = np.random.default_rng(scrapes)
        self.rng = np.random.default_rng(readings)
        self.bursts = self._bursts(np.random.default_rng(bursts))
        self._all: _Block | None = None
        self._boundaries = self._condition_changes()
        self.written = 0  # samples json_lines has produced

    # ------------------------------------------------------------------ the job, step by step

    def _pause(self, t: float) -> Event | None:
        return next((e for e in self.s.events if e.kind in ("checkpoint", "restart") and e.active(t)), None)

    def _warm(self, t: float) -> bool:
        starts = [0.0, *(e.end for e in self.s.events if e.kind == "restart" and e.end <= t)]
        return t - max(starts) < self.s.warmup_s

    def _condition_changes(self) -> list[float]:
        s = self.s
        times = {s.duration_s, s.warmup_s}
        for e in s.events:
            times.update((e.start, e.end))
            if e.kind == "restart":
                times.add(e.end + s.warmup_s)
        return sorted(t for t in times if 0 < t <= s.duration_s)

    def _steps(self) -> Iterator[_Block]:
        """The steps in order, a block at a time: within a block every step starts under the same events."""
        s = self.s
        rng = np.random.default_rng(self._step_seed)
        ranks = s.ranks
        base_c = s.step_s * s.compute_fraction
        base_x = s.step_s * (1.0 - s.compute_fraction)
        line_rate = s.link_bytes_per_s * 0.9
        stage = np.arange(ranks) // (s.tp * s.dp)
        stage_factor = np.where((stage == s.pp - 1) & (s.pp > 1), 1.0 + s.pp_imbalance, 1.0)
        comm_total = bytes_total = 0.0
        busy_total = np.zeros(ranks)
        t = 0.0
        while t < s.duration_s:
            paused = self._pause(t)
            if paused is not None:
                t = paused.end
                continue
            active = [e for e in s.events if e.active(t)]
            evaluating = any(e.kind == "eval" for e in active)
            warm = self._warm(t)
            slow = np.ones(ranks)
            host = np.zeros(ranks)
            link = 1.0
            for e in active:
                if e.kind == "compute_slow":
                    for r in e.ranks:
                        slow[r] *= e.factor
                elif e.kind == "host_slow" and e.node is not None:
                    span = slice(e.node * s.npus_per_node, (e.node + 1) * s.npus_per_node)
                    host[span] = np.maximum(host[span], (e.factor - 1.0) * base_c)
                elif e.kind == "link_slow":
                    link = max(link, e.factor)
            until = next(b for b in self._boundaries if b > t) if t < self._boundaries[-1] else s.duration_s
            x = base_x * (0.2 if evaluating else 1.0)
            sent = line_rate * x
            x *= link
            nominal = float(np.max(host + base_c * stage_factor * slow)) * (0.35 if evaluating else 1.0) + x
            n = int(min(MAX_BLOCK, max(1, math.ceil((until - t) / max(nominal, 1e-3) * 1.05) + 1)))
            compute = base_c * stage_factor * slow * np.maximum(0.5, 1.0 + rng.normal(0.0, s.step_jitter,
                                                                                       (n, ranks)))
            if warm:
                compute *= rng.uniform(1.0 - s.warmup_jitter, 1.0 + s.warmup_jitter, (n, ranks))
            if evaluating:
                compute *= 0.35  # forward passes only
            ready = np.max(host + compute, axis=1)
            length = ready + x
            start = t + np.concatenate(([0.0], np.cumsum(length[:-1])))
            m = int(np.searchsorted(start, until, side="left"))  # the steps that start before `until`
            start, ready, compute = start[:m], ready[:m], compute[:m]
            before = np.arange(m) * x
            busy_before = busy_total + np.concatenate((np.zeros((1, ranks)), np.cumsum(compute[:-1], axis=0)))
            yield _Block(start=start, ready=start + ready, end=start + ready + x, comm_before=comm_total + before,
                         bytes_before=bytes_total + np.arange(m) * sent, comm_bytes=np.full(m, sent),
                         lo=start[:, None] + host[None, :], compute=compute, busy_before=busy_before)
            busy_total = busy_before[-1] + compute[-1]
            comm_total += m * x
            bytes_total += m * sent
            t = float(start[-1] + ready[-1] + x)

    def _bursts(self, rng: np.random.Generator) -> dict[int, np.ndarray]:
        """Transient congestion: per port, bursts of pause frames (not a fault: seconds long), a Poisson
        process; each rank's (bursts, 2) array of [start, end) sorted by start."""
        s = self.s
        per_s = s.pfc_bursts_per_port_hour / 3600.0
        out: dict[int, np.ndarray] = {}
        if per_s <= 0:
            return out
        counts = rng.poisson(per_s * s.duration_s, s.ranks)
        for r in np.flatnonzero(counts):
            lo = np.sort(rng.uniform(0.0, s.duration_s, counts[r]))
            out[int(r)] = np.stack((lo, lo + rng.uniform(1.0, s.pfc_burst_max_s, counts[r])), axis=1)
        return out

    # ------------------------------------------------------------------ what a chip reads at time t

    def _every_step(self) -> _Block:
        if self._all is None:
            self._all = _join(list(self._steps()))
        return self._all

    @staticmethod
    def _busy_until(block: _Block, t: np.ndarray, ranks: np.ndarray) -> np.ndarray:
        """Compute seconds of each rank in ``ranks`` from the start to each time of ``t``: t is (..., n) and
        ranks (..., r) with matching leading shapes; the result (..., r, n)."""
        k = np.searchsorted(block.start, t, side="right") - 1
        safe = np.maximum(k, 0)[..., None, :]
        r = ranks[..., :, None]
        done = block.busy_before[safe, r] + np.clip(t[..., None, :] - block.lo[safe, r], 0.0,
                                                    block.compute[safe, r])
        return np.where(k[..., None, :] >= 0, done, 0.0)

    @staticmethod
    def _comm_until(block: _Block, t: np.ndarray) -> np.ndarray:
        k = np.searchsorted(block.start, t, side="right") - 1
        safe = np.maximum(k, 0)
        done = block.comm_before[safe] + np.clip(t - block.ready[safe], 0.0, block.end[safe] - block.ready[safe])
        return np.where(k >= 0, done, 0.0)

    @staticmethod
    def _sent_until(block: _Block, t: np.ndarray) -> np.ndarray:
        k = np.searchsorted(block.start, t, side="right") - 1
        safe = np.maximum(k, 0)
        span = block.end[safe] - block.ready[safe]
        share = np.where(span > 0, np.clip(t - block.ready[safe], 0.0, span) / np.where(span > 0, span, 1.0), 1.0)
        return np.where(k >= 0, block.bytes_before[safe] + block.comm_bytes[safe] * share, 0.0)

    def busy(self, rank: int, a: float, b: float) -> float:
        """Seconds the rank's AI Cores computed within [a, b]."""
        done = self._busy_until(self._every_step(), np.array([a, b]), np.array([rank]))[0]
        return float(done[1] - done[0])

    def comm_time(self, t: float) -> float:
        """Collective seconds from the start to t (every port carries every collective)."""
        return float(self._comm_until(self._every_step(), np.array([t]))[0])

    def sent_bytes(self, t: float) -> float:
        return float(self._sent_until(self._every_step(), np.array([t]))[0])

    def _pauses(self, ranks: np.ndarray, t: np.ndarray, steps: _Block) -> tuple[np.ndarray, np.ndarray]:
        """(PFC pause frames, retransmissions) of each port in ``ranks`` (nodes, npus) from the start to each
        time of ``t`` (nodes, scrapes); ``steps``: every step so far (their collectives' time)."""
        s = self.s
        frames = np.broadcast_to(s.pfc_background_per_s * t[:, None, :], (*ranks.shape, t.shape[1])).copy()
        retries = np.zeros_like(frames)
        position = {int(r): index for index, r in np.ndenumerate(ranks)}
        tmin, tmax = (float(t.min()), float(t.max())) if t.size else (0.0, 0.0)
        for rank, spans in self.bursts.items():
            if rank not in position:
                continue
            node, npu = position[rank]
            done = spans[:, 1] <= tmin
            frames[node, npu] += s.pfc_burst_per_s * float(np.sum(spans[done, 1] - spans[done, 0]))
            for lo, hi in spans[~done & (spans[:, 0] < tmax)]:
                frames[node, npu] += s.pfc_burst_per_s * np.clip(t[node] - lo, 0.0, hi - lo)
        for e in s.events:
            if e.kind == "link_slow" and e.pair is not None and e.pair[0] in position:
                node, npu = position[e.pair[0]]
                since = (self._comm_until(steps, np.minimum(t[node], e.end))
                         - self._comm_until(steps, np.array([e.start])))
                during = np.where(t[node] > e.start, since, 0.0)
                frames[node, npu] += PFC_FAULT_PER_COMM_S * (e.factor - 1.0) / e.factor * during
                retries[node, npu] += RETRY_FAULT_PER_COMM_S * (e.factor - 1.0) / e.factor * during
        return frames, retries

    def pauses(self, rank: int, t: float) -> tuple[float, float]:
        """(PFC pause frames, retransmissions) the rank's port counted from the start to t."""
        block = self._every_step()
        frames, retries = self._pauses(np.array([[rank]]), np.array([[t]]), block)
        return float(frames[0, 0, 0]), float(retries[0, 0, 0])

    def _host_cpu(self, nodes: np.ndarray, t: np.ndarray) -> np.ndarray:
        """The host CPU of each node of ``nodes`` (n,) at each time of ``t`` (n, scrapes)."""
        s = self.s
        value = np.full(t.shape, float(s.host_cpu))
        for e in s.events:
            if e.kind == "host_slow":
                mine = (nodes == e.node)[:, None]
                value = np.where(mine & (t >= e.start) & (t < e.end), 0.97, value)
        for e in s.events:  # a pause wins, as the first paused event in the file does
            if e.kind in ("checkpoint", "restart"):
                during = (t >= e.start) & (t < e.end) & ~self._paused_before(e, t)
                value = np.where(during, 0.8 if e.kind == "checkpoint" else 0.1, value)
        noise = self.rng.normal(0.0, 1.0, t.shape) * np.where(value < 0.9, s.host_cpu_noise, 0.01)
        return np.clip(value + noise, 0.0, 1.0)

    def _paused_before(self, event: Event, t: np.ndarray) -> np.ndarray:
        """Whether a pause listed before ``event`` is active at each time (the first listed wins)."""
        out = np.zeros(t.shape, bool)
        for e in self.s.events:
            if e is event:
                break
            if e.kind in ("checkpoint", "restart"):
                out |= (t >= e.start) & (t < e.end)
        return out

    def host_cpu(self, node: int, t: float) -> float:
        return float(self._host_cpu(np.array([node]), np.array([[t]]))[0, 0])

    def running(self, t: float) -> bool:
        return not any(e.kind == "restart" and e.active(t) for e in self.s.events)

    def _running(self, t: np.ndarray) -> np.ndarray:
        out = np.ones(t.shape, bool)
        for e in self.s.events:
            if e.kind == "restart":
                out &= ~((t >= e.start) & (t < e.end))
        return out

    # ------------------------------------------------------------------ the series

    def chunks(self) -> Iterator[Chunk]:
        """The readings, a chunk of time after another; each node's scrapes at its own phase, jittered by up to
        ``scrape_jitter_s``, ``scrape_miss`` of them lost, and a scrape not later than the node's previous
        one dropped."""
        s = self.s
        rng = self._scrape_rng
        nodes = np.arange(s.nodes)
        ranks = nodes[:, None] * s.npus_per_node + np.arange(s.npus_per_node)[None, :]
        phase = rng.uniform(0.0, s.scrape_s, s.nodes)
        slots = max(1, round(self.chunk_s / s.scrape_s))
        total = math.ceil(s.duration_s / s.scrape_s) + 1
        last = np.full(s.nodes, -math.inf)
        steps = self._steps()
        held: list[_Block] = []  # the steps that the current chunk may read, in order
        every: list[_Block] = []  # only their scalars are kept: the collectives' time since the start
        ended = False
        window = s.util_window_s
        reads = int(s.util_reads)
        read_s = s.scrape_s / reads
        for first in range(0, total, slots):
            grid = phase[:, None] + s.scrape_s * np.arange(first, min(first + slots, total))[None, :]
            inside = grid < s.duration_s
            if not inside.any():
                break
            kept = inside & (rng.random(grid.shape) >= s.scrape_miss)
            times = np.maximum(0.0, grid + rng.uniform(-s.scrape_jitter_s, s.scrape_jitter_s, grid.shape))
            for column in range(times.shape[1]):  # later than the previous scrape kept (a jitter > half a slot)
                kept[:, column] &= times[:, column] > last
                last = np.where(kept[:, column], times[:, column], last)
            tmax = float(times.max())
            while not ended and (not held or held[-1].start[-1] <= tmax):
                block = next(steps, None)
                if block is None:
                    ended = True
                    break
                held.append(block)
                every.append(_Block(block.start, block.ready, block.end, block.comm_before, block.bytes_before,
                                    block.comm_bytes, *(np.empty((0, 0)),) * 3))
            oldest = max(0.0, float(times.min()) - window - reads * read_s)
            while len(held) > 1 and held[1].start[0] <= oldest:
                held.pop(0)
            if not held:  # the job never ran a step (it starts paused to the end)
                held.append(_Block(*(np.empty(0),) * 6, *(np.empty((0, s.ranks)),) * 3))
            block = _join(held)
            scalars = _join(every)
            busy, util = self._utilization(block, times, ranks, reads, read_s)
            frames, retries = self._pauses(ranks, times, scalars)
            yield Chunk(times=times, kept=kept, host_cpu=self._host_cpu(nodes, times), running=self._running(times),
                        sent=self._sent_until(block, times), util=util, busy=busy, frames=frames, retries=retries)

    def _utilization(self, block: _Block, times: np.ndarray, ranks: np.ndarray, reads: int,
                     read_s: float) -> tuple[np.ndarray, np.ndarray]:
        """(busy, exported) of each chip at each scrape time: a reading is the chip's busy share over the last
        ``util_window_s`` with ``util_noise`` added, and what is exported the mean of the agent's ``util_reads``
        readings ``read_s`` apart before the scrape, the newest half a read before it (collectors.dcmi.failslow_reads:
        the reads run between the exports, half an interval off them); one read is taken at the scrape. Busy is the
        same mean without the noise."""
        s = self.s
        window = s.util_window_s
        busy = np.zeros((*ranks.shape, times.shape[1]))
        util = np.zeros_like(busy)
        first = 0.5 if reads > 1 else 0.0
        for k in range(reads):
            at = np.maximum(0.0, times - (k + first) * read_s)
            share = self._busy_until(block, at, ranks) - self._busy_until(block, np.maximum(0.0, at - window), ranks)
            share = np.where(at[:, None, :] > 0, share / window, 0.0)
            busy += share
            util += np.clip(share + self.rng.normal(0.0, s.util_noise, share.shape), 0.0, 1.0)
        return busy / reads, util / reads

    def _labels(self, node: int) -> dict[str, str]:
        index = self.node_base + node
        return {"job": "npuwatch", "instance": f"10.{index // 250}.{index % 250}.1:9101", "node": node_name(index)}

    def _series(self, chunk: Chunk, metrics: Iterable[str]) -> Iterator[tuple[str, dict[str, str], np.ndarray,
                                                                            np.ndarray, np.ndarray]]:
        """(name, labels, kept mask, values) per series of the chunk (values rounded as the text format
        writes them), node by node."""
        s = self.s
        wanted = set(metrics)
        for node in range(s.nodes):
            base = self._labels(node)
            kept = chunk.kept[node]
            if "npuwatch_host_cpu_utilization_ratio" in wanted:
                yield ("npuwatch_host_cpu_utilization_ratio", base, kept, np.round(chunk.host_cpu[node], 4),
                       chunk.times[node])
            sent = np.floor(chunk.sent[node])
            for npu in range(s.npus_per_node):
                rank = node * s.npus_per_node + npu
                chip = {**base, "npu": str(npu), "chip": "0"}
                columns: list[tuple[str, dict[str, str], np.ndarray, np.ndarray]] = [
                    ("npu_aicore_utilization_ratio", chip, kept, np.round(chunk.util[node, npu], 4)),
                    ("npu_aicore_frequency_hertz", chip, kept, np.full(kept.shape, CLOCK_HZ)),
                    ("npu_roce_transmitted_bytes_total", chip, kept, sent),
                    ("npu_roce_pfc_pause_frames_total", {**chip, "direction": "rx"}, kept,
                     np.floor(chunk.frames[node, npu])),
                    ("npu_roce_errors_total", {**chip, "counter": ERROR_COUNTER}, kept,
                     np.floor(chunk.retries[node, npu])),
                ]
                if s.tp > 1:
                    columns.append(("npu_hccs_bandwidth_bytes_per_second", {**chip, "link": "0", "direction": "tx"},
                                    kept, np.rint(HCCS_BYTES_PER_S * chunk.busy[node, npu])))
                columns.append(("npu_job_info", {**chip, "training_job": s.job, "rank": str(rank),
                                                 "local_rank": str(npu), "world_size": str(s.ranks),
                                                 "source": "env"}, kept & chunk.running[node], np.ones(kept.shape)))
                for name, labels, mask, values in columns:
                    if name in wanted:
                        yield name, labels, mask, values, chunk.times[node]

    def lines(self, t0: float, metrics: Iterable[str] = METRICS) -> Iterator[str]:
        """Every sample, in Prometheus' text import format with millisecond timestamps (from ``t0``)."""
        formats = {"npu_aicore_utilization_ratio": "{:.4f}", "npuwatch_host_cpu_utilization_ratio": "{:.4f}",
                   "npu_aicore_frequency_hertz": "{:.0f}"}
        for chunk in self.chunks():
            for name, labels, mask, values, times in self._series(chunk, metrics):
                text = ",".join(f'{key}="{value}"' for key, value in labels.items())
                form = formats.get(name, "{:.0f}")
                stamps = ((t0 + times[mask]) * 1000).astype(np.int64)
                for value, ms in zip(values[mask].tolist(), stamps.tolist()):
                    yield f"{name}{{{text}}} {form.format(value)} {ms}"

    def json_lines(self, t0: float, metrics: Iterable[str] = METRICS) -> Iterator[str]:
        """Every sample, one series of one chunk a line, as VictoriaMetrics' ``/api/v1/import`` reads it."""
        for chunk in self.chunks():
            for name, labels, mask, values, times in self._series(chunk, metrics):
                if not mask.any():
                    continue
                stamps = ((t0 + times[mask]) * 1000).astype(np.int64)
                picked = values[mask]
                numbers = picked.tolist() if name in _RATIOS else picked.astype(np.int64).tolist()
                self.written += len(numbers)
                yield (f'{{"metric":{json.dumps({"__name__": name, **labels})},'
                       f'"values":{json.dumps(numbers)},"timestamps":{json.dumps(stamps.tolist())}}}')
