"""The fail-slow readings through DCMI (agent/dcmi/fast.py) and the fail-slow intervals of the config: every chip's
AI Core busy fraction and clock in one round trip, the slow sources' readings as the fallback, and which group
runs ``hccn_tool -stat``. The calls are answered in process by the fake library's formulas."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest
import yaml

from agent.core.config import ConfigError, build_config
from agent.core.snapshot import SnapshotStore
from agent.daemon.service import enabled_sources, group_interval
from agent.dcmi.backend import DcmiBackend
from agent.dcmi.fast import FAST_METRICS, FastReadings, slow_values
from collectors.base import ChipRef, Sample
from tests.support import fake_dcmi as fake
from tests.support.dcmi_calls import FakeCalls

CHIPS = [ChipRef(npu=card, chip=0) for card in range(8)]  # card i of the fake is logic (i + 3) % 8
UTIL, FREQ = "npu_aicore_utilization_ratio", "npu_aicore_frequency_hertz"


def _logic(chip: ChipRef) -> int:
    return (chip.npu + 3) % 8


def _store(fresh: bool = True) -> SnapshotStore:
    """The slow sources' snapshots: the table's busy fraction 0.5 + card, -t common's clock 1e9 + card."""
    now = [1000.0]
    store = SnapshotStore(lambda: now[0])
    for source, metric, value in (("npu_smi_info", UTIL, 0.5), ("npu_smi_common", FREQ, 1e9)):
        store.register(source, 10.0)
        samples = [out for ref in CHIPS for out in (Sample(metric, ref.labels(), value + ref.npu),
                                                    Sample("npu_temperature_celsius", ref.labels(), 40.0))]
        store.put_success(source, samples, None, now[0], 0.1)
    if not fresh:
        now[0] += 31  # past 3 intervals
    return store


def _fast(calls: FakeCalls, fresh: bool = True) -> FastReadings:
    store = _store(fresh)

    def is_fresh(source: str) -> bool:
        snap = store.get(source)
        return snap is not None and snap.fresh(store.clock())

    return FastReadings(DcmiBackend(calls), lambda: CHIPS, slow_values(store.get, is_fresh))  # type: ignore[arg-type]


class Readings(FakeCalls):
    """The fake's answers, but the AI Core usage of every chip is ``percent``."""

    percent = 40

    def __call__(self, name: str, **args: Any) -> Any:
        answer = super().__call__(name, **args)  # counted, and failing as the fake is told to
        return self.percent if name == "utilization" else answer


def _averaging(calls: FakeCalls, now: list[float]) -> FastReadings:
    fast = _fast(calls)
    fast.clock = lambda: now[0]
    fast.configure(5, 5.0)
    return fast


def _by_chip(samples: list[Sample], metric: str) -> dict[int, float]:
    return {int(dict(s.labels)["npu"]): s.value for s in samples if s.metric == metric}


def test_every_chip_is_read_in_one_round_trip_in_base_units() -> None:
    calls = FakeCalls()
    fast = _fast(calls)
    fast.collect()  # the first read lists the library's chips (logical ids)
    batches = calls.batches
    samples = fast.collect()
    assert calls.batches == batches + 1 and calls.count["utilization"] == 16 and calls.count["frequency"] == 16
    assert _by_chip(samples, UTIL) == {c.npu: fake.expected_utilization(_logic(c), 2) / 100 for c in CHIPS}
    assert _by_chip(samples, FREQ) == {c.npu: fake.expected_frequency(_logic(c), 7) * 1e6 for c in CHIPS}


def test_a_failed_dcmi_reading_gets_the_slow_sources_reading() -> None:
    calls = FakeCalls()
    fast = _fast(calls)
    calls.unsupported.add("utilization")  # the chip has no AI Core rate through DCMI: the table's stands in
    calls.codes["frequency"] = -8006  # a failing clock read: -t common's stands in
    samples = fast.collect()
    assert _by_chip(samples, UTIL) == {c.npu: 0.5 + c.npu for c in CHIPS}
    assert _by_chip(samples, FREQ) == {c.npu: 1e9 + c.npu for c in CHIPS}
    assert {s.metric for s in samples} == FAST_METRICS


def test_a_stale_slow_reading_is_no_fallback_and_a_helper_failure_without_one_fails_the_job() -> None:
    calls = FakeCalls()
    fast = _fast(calls, fresh=False)
    calls.unsupported.add("utilization")
    assert _by_chip(fast.collect(), UTIL) == {}  # absent, never a stale value
    calls.worker["chips"] = "timeout"  # the helper hung: not one reading
    calls.worker["frequency"] = "died"
    with pytest.raises(RuntimeError, match="no slower reading"):
        fast.collect()


def test_a_source_the_trust_check_gave_back_to_npu_smi_is_read_from_npu_smi() -> None:
    calls = FakeCalls()
    fast = _fast(calls)
    fast.backend.give_back("npu_smi_info", "AI Core usage disagreed")
    samples = fast.collect()
    assert _by_chip(samples, UTIL) == {c.npu: 0.5 + c.npu for c in CHIPS}
    assert _by_chip(samples, FREQ) == {c.npu: fake.expected_frequency(_logic(c), 7) * 1e6 for c in CHIPS}


@pytest.mark.parametrize("fresh", [True, False])
def test_an_impossible_reading_is_dropped(fresh: bool) -> None:
    calls = FakeCalls()
    fast = _fast(calls, fresh)
    real = calls.__call__

    class Over(FakeCalls):
        def __call__(self, name: str, **args: Any) -> Any:
            return 250 if name == "utilization" else real(name, **args)

    calls.__class__ = Over
    assert _by_chip(fast.collect(), UTIL) == ({c.npu: 0.5 + c.npu for c in CHIPS} if fresh else {})


def test_the_fail_slow_intervals_default_to_5_s_and_none_leaves_the_slow_ones() -> None:
    config = build_config({})
    assert config.collectors.dcmi.failslow_interval == 5.0
    stat = {s.name: s for s in enabled_sources(config)}["hccn_stat"]
    assert stat.group == "roce_stat" and group_interval(config, stat.group) == 5.0
    assert {s.name: s for s in enabled_sources(config)}["hccn_link"].group == "roce"
    config = build_config(yaml.safe_load(
        "collectors: {dcmi: {failslow_interval: null}, hccn_tool: {stat_interval: null}}"))
    assert config.collectors.dcmi.failslow_interval is None
    assert {s.name: s for s in enabled_sources(config)}["hccn_stat"].group == "roce"
    config = build_config(yaml.safe_load("collectors: {hccn_tool: {stat_interval: 15s}}"))
    assert group_interval(config, "roce_stat") == 15.0


def test_the_busy_fraction_is_the_mean_of_the_readings_of_the_last_interval() -> None:
    calls = Readings()
    now = [100.0]
    fast = _averaging(calls, now)
    seen = []
    for percent in (40, 40, 90, 40, 40, 40, 40, 40):  # a reading every second, one of them high
        calls.percent = percent
        fast.sample()
        seen.append(_by_chip(fast.collect(), UTIL)[0])
        now[0] += 1.0
    # the 90 counts a fifth while it is one of the last 5 readings, then not at all
    assert seen == [0.4, 0.4, pytest.approx(0.5667, abs=1e-4), 0.525, 0.5, 0.5, 0.5, 0.4]


def test_with_reads_between_the_collect_reads_the_clock_and_a_read_the_busy_fraction_alone() -> None:
    calls = Readings()
    now = [100.0]
    fast = _averaging(calls, now)
    fast.collect()  # the first read lists the library's chips
    batches, count = calls.batches, Counter(calls.count)
    samples = fast.collect()
    assert calls.batches == batches + 1 and calls.count["frequency"] == count["frequency"] + 8
    assert calls.count["utilization"] == count["utilization"]  # sample's, not the collect's
    assert _by_chip(samples, FREQ) == {c.npu: fake.expected_frequency(_logic(c), 7) * 1e6 for c in CHIPS}
    fast.sample()
    assert calls.batches == batches + 2 and calls.count["utilization"] == count["utilization"] + 8
    assert calls.count["utilizations"] == count["utilizations"] + 1  # one call for every chip
    assert calls.count["frequency"] == count["frequency"] + 8
    assert fast.sampled and not _fast(calls).sampled  # one read an interval: the collect reads it itself


def test_a_failed_read_keeps_the_mean_of_the_readings_still_in_the_interval_then_falls_back() -> None:
    calls = Readings()
    now = [100.0]
    fast = _averaging(calls, now)
    for percent in (20, 30):
        calls.percent = percent
        fast.sample()
        now[0] += 1.0
    calls.codes["utilization"] = -8006
    fast.sample()  # fails quietly: the collect says what DCMI does
    assert _by_chip(fast.collect(), UTIL)[0] == 0.25  # the two readings of the last 5 s
    calls.worker["utilization"] = "timeout"
    fast.sample()
    now[0] += 4.0  # both older than the interval: the table's reading stands in, never an old mean
    assert _by_chip(fast.collect(), UTIL) == {c.npu: 0.5 + c.npu for c in CHIPS}


def test_a_chip_given_back_to_npu_smi_starts_its_mean_again() -> None:
    calls = Readings()
    now = [100.0]
    fast = _averaging(calls, now)
    calls.percent = 80
    fast.sample()
    fast.backend.give_back("npu_smi_info", "AI Core usage disagreed")
    now[0] += 1.0
    count = calls.count["utilization"]
    fast.sample()
    assert calls.count["utilization"] == count  # not read through DCMI any more
    assert _by_chip(fast.collect(), UTIL) == {c.npu: 0.5 + c.npu for c in CHIPS}
    assert all(not kept for kept in fast._recent.values())


def test_failslow_reads_may_not_read_more_often_than_once_a_second() -> None:
    assert build_config({}).collectors.dcmi.failslow_reads == 5
    with pytest.raises(ConfigError, match="failslow_reads: 6 reads in 5s is one every"):
        build_config(yaml.safe_load("collectors: {dcmi: {failslow_reads: 6}}"))
    assert build_config(yaml.safe_load(
        "collectors: {dcmi: {failslow_interval: 10s, failslow_reads: 10}}")).collectors.dcmi.failslow_reads == 10
    build_config(yaml.safe_load("collectors: {dcmi: {failslow_interval: null, failslow_reads: 10}}"))
