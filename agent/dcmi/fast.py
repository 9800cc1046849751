"""The fail-slow readings through DCMI (docs/failslow.md#signals): each chip's AI Core busy fraction and clock.
Every ``collectors.dcmi.failslow_interval`` (5 s) the ``npu_fast`` job reads every chip's clock in one round trip
to the helper and exports it with the busy fraction; the busy fraction is read ``collectors.dcmi.failslow_reads``
(5) times in the interval by ``FastReadings.sample`` (one helper call for every chip, nothing stored) and
exported as the mean of the chip's readings of the last interval. Where a reading's noise is its own (not the
next reading's), the mean of 5 has a 2.2 times smaller one, which is what lets the fleet rules name a chip 10 %
slower than its peers within a minute (docs/failslow.md#measured).

While the ``npu_fast`` job is fresh the exposition shows its ``npu_aicore_utilization_ratio`` and
``npu_aicore_frequency_hertz`` (``OWNERS``: one writer per series), not those of the slower sources that
read them too (the ``npu-smi info`` table, ``-t common``), which keep them in their own samples for the
node page, its history and the probes' idle check, and show them again while ``npu_fast`` is down. A
chip whose DCMI reading failed gets the slow sources' fresh reading, so a DCMI problem costs the 5 s
cadence, never the series; a source the trust check gave back to npu-smi (``DcmiBackend.on_tool``) is
read from its slow source only.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from agent.core.backend import Fallback
from agent.dcmi.backend import DcmiBackend
from agent.dcmi.client import Answer
from collectors.base import ChipRef, LabelPairs, NoData, Sample
from collectors.bounds import Rejects
from collectors.dcmi.errors import DcmiBadRequest, DcmiCallHung, DcmiError, DcmiUnsupported, DcmiWorkerError
from collectors.dcmi.records import FREQ_AICORE_CURRENT, MHZ

__all__ = ["FAST_METRICS", "JOB_NAME", "OWNERS", "SAMPLER_NAME", "SLOW_SOURCE", "FastReadings", "slow_values"]

JOB_NAME = "npu_fast"
SAMPLER_NAME = "npu_fast_reads"  # the busy fraction's reads between two runs of npu_fast
UTILIZATION = "npu_aicore_utilization_ratio"
FREQUENCY = "npu_aicore_frequency_hertz"
FAST_METRICS = frozenset({UTILIZATION, FREQUENCY})
AICORE = 2  # dcmi_get_device_utilization_rate's input type for the AI Core
# the slow source of each metric: where it falls back to, and which source the trust check may give back
SLOW_SOURCE = {UTILIZATION: "npu_smi_info", FREQUENCY: "npu_smi_common"}
OWNERS = {UTILIZATION: JOB_NAME, FREQUENCY: JOB_NAME}  # for the exposition (SnapshotRenderer's owners)
SlowValues = Callable[[], Mapping[tuple[str, LabelPairs], float]]  # (metric, labels) -> the slow sources' value


class FastReadings:
    """The ``npu_fast`` job's collect, every ``window_s``: a batch of DCMI calls, the clock and (with one read an
    interval) the busy fraction of every chip; with more, ``sample`` reads the busy fraction alone between the
    collects, every ``window_s / reads``, and the collect exports the mean of the chip's readings of the last
    ``window_s``. The slow sources' readings where a chip has none."""

    def __init__(self, backend: DcmiBackend, chips: Callable[[], Sequence[ChipRef]], slow: SlowValues, *,
                 reads: int = 1, window_s: float = 5.0, clock: Callable[[], float] = time.monotonic) -> None:
        self.backend = backend
        self.chips = chips
        self.slow = slow
        self.reads = reads
        self.window_s = window_s
        self.clock = clock
        self._lock = threading.Lock()  # sample and collect run in different threads
        self._recent: dict[ChipRef, deque[tuple[float, float]]] = {}  # (when, percent) of the last readings

    @property
    def sampled(self) -> bool:
        """Whether ``sample`` reads the busy fraction (every ``window_s / reads``) rather than the collect."""
        return self.reads > 1

    def configure(self, reads: int, window_s: float) -> None:
        """A reload's averaging: the readings kept so far are kept where they still fit."""
        with self._lock:
            self.reads, self.window_s = reads, window_s
            self._recent = {chip: deque(kept, maxlen=reads) for chip, kept in self._recent.items()}

    def sample(self) -> None:
        """One reading of every chip's busy fraction, kept for the collect's mean: one call for every chip
        (``utilizations``: one answer line), nothing stored. A failure costs this reading only (the collect,
        which calls DCMI too, says why it fails), and a source given back to npu-smi is not read."""
        chips = list(self.chips())
        if not chips or SLOW_SOURCE[UTILIZATION] in self.backend.on_tool():
            return
        try:
            logic = [self.backend.logic_id(chip) for chip in chips]
            answer, = self.backend.client.call_batch([("utilizations", {"chips": logic, "input_type": AICORE})])
        except (Fallback, DcmiWorkerError, DcmiCallHung, DcmiError, DcmiUnsupported, DcmiBadRequest, ValueError):
            return
        each = answer.value if answer.error is None and isinstance(answer.value, list) else []
        rejects = Rejects()
        now = self.clock()
        with self._lock:
            for chip, item in zip(chips, each):
                ok = isinstance(item, dict) and item.get("ok") is True
                percent = _value(Answer(item.get("value")), UTILIZATION, rejects) if ok else None
                if percent is not None:
                    self._kept(chip).append((now, percent))

    def collect(self) -> list[Sample]:
        chips = list(self.chips())
        if not chips:
            raise NoData("no chips listed yet")
        fallback = self.slow()
        on_tool = self.backend.on_tool()
        try:
            answers = self._read(chips)
            failed: Exception | None = None
        except (Fallback, DcmiWorkerError, DcmiCallHung, DcmiError, DcmiUnsupported, DcmiBadRequest,
                ValueError) as exc:
            answers, failed = {}, exc
        rejects = Rejects()
        now = self.clock()
        out: list[Sample] = []
        with self._lock:
            self._recent = {chip: self._recent[chip] for chip in chips if chip in self._recent}  # gone: forgotten
            for chip in chips:
                labels = chip.labels()
                for metric in (UTILIZATION, FREQUENCY):
                    given_back = SLOW_SOURCE[metric] in on_tool
                    value = None if given_back else _value(answers.get((chip, metric)), metric, rejects)
                    if metric == UTILIZATION:
                        value = self._mean(chip, now, value, given_back)
                    if value is None:
                        value = fallback.get((metric, labels))
                    if value is not None:
                        out.append(Sample(metric, labels, value))
        if failed is not None and not out:
            raise RuntimeError(f"DCMI: {failed}; no slower reading to fall back on") from failed
        return out

    def _kept(self, chip: ChipRef) -> deque[tuple[float, float]]:
        kept = self._recent.get(chip)
        if kept is None:
            kept = self._recent[chip] = deque(maxlen=self.reads)
        return kept

    def _mean(self, chip: ChipRef, now: float, percent: float | None, given_back: bool) -> float | None:
        """The chip's busy fraction: the mean of its readings of the last ``window_s`` (this one's too, when
        it was read), None when there is none; a chip read from npu-smi starts again."""
        kept = self._kept(chip)
        if given_back:
            kept.clear()
            return None
        if percent is not None:
            kept.append((now, percent))
        while kept and now - kept[0][0] >= self.window_s:
            kept.popleft()
        # the mean of the raw percents: equal readings give exactly the reading
        return sum(p for _, p in kept) / len(kept) / 100.0 if kept else None

    def _read(self, chips: Sequence[ChipRef]) -> dict[tuple[ChipRef, str], Answer]:
        """The collect's batch: each chip's clock, and its busy fraction unless ``sample`` reads it."""
        calls: list[tuple[str, dict[str, Any]]] = []
        keys: list[tuple[ChipRef, str]] = []
        for chip in chips:
            logic = self.backend.logic_id(chip)
            if not self.sampled:
                calls.append(("utilization", {"chip": logic, "input_type": AICORE}))
                keys.append((chip, UTILIZATION))
            calls.append(("frequency", {"chip": logic, "freq_type": FREQ_AICORE_CURRENT}))
            keys.append((chip, FREQUENCY))
        return dict(zip(keys, self.backend.client.call_batch(calls)))


def slow_values(snapshot: Callable[[str], Any], fresh: Callable[[str], bool]) -> SlowValues:
    """The fast metrics as the slow sources last read them (``snapshot(source)``: its snapshot), fresh ones only."""

    def values() -> dict[tuple[str, LabelPairs], float]:
        out: dict[tuple[str, LabelPairs], float] = {}
        for metric, source in SLOW_SOURCE.items():
            snap = snapshot(source)
            if snap is not None and fresh(source):
                out.update(((metric, s.labels), s.value) for s in snap.samples if s.metric == metric)
        return out

    return values


def _value(answer: Answer | None, metric: str, rejects: Rejects) -> float | None:
    """The answer in base units, None when the call failed or its value is impossible."""
    if answer is None or answer.error is not None or not isinstance(answer.value, int):
        return None
    if metric == UTILIZATION:  # in percent: the caller averages the readings
        return rejects.value("percent", float(answer.value), what="DCMI AI Core usage")
    return rejects.value("frequency_hertz", float(answer.value) * MHZ, what="DCMI AI Core clock")
