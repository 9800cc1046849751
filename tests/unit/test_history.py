"""agent.core.history: the node page's bounded rings, fed from the snapshot store."""

from __future__ import annotations

import pytest

from agent.core.history import HOUR_S, SERIES, NodeHistory, Ring
from agent.core.snapshot import SnapshotStore
from collectors.base import Sample, label_pairs


def chip_sample(metric: str, npu: int, value: float, chip: int = 0) -> Sample:
    return Sample(metric, label_pairs(npu=npu, chip=chip), value)


def table(npu: int, temperature: float, aicore: float = 0.5, used: float = 32.0, total: float = 64.0) -> list[Sample]:
    return [chip_sample("npu_temperature_celsius", npu, temperature),
            chip_sample("npu_aicore_utilization_ratio", npu, aicore),
            chip_sample("npu_hbm_used_bytes", npu, used), chip_sample("npu_hbm_total_bytes", npu, total),
            chip_sample("npu_power_watts", npu, 200.0)]


def test_a_ring_keeps_the_last_points_oldest_first() -> None:
    ring = Ring(3, step_s=10.0)
    assert ring.points() == [] and ring.latest() is None
    for at in (0.0, 10.0, 20.0, 30.0, 40.0):
        ring.append(at, at / 10)
    assert len(ring) == 3 and ring.size == 3
    assert ring.points() == [(20.0, 2.0), (30.0, 3.0), (40.0, 4.0)]
    assert ring.points(since=30.0) == [(30.0, 3.0), (40.0, 4.0)]
    assert ring.latest() == 40.0


def test_points_closer_than_a_step_share_a_slot_keeping_the_worst() -> None:
    hot = Ring(4, step_s=10.0)
    for at, value in ((0.0, 60.0), (4.0, 90.0), (8.0, 70.0), (10.0, 65.0)):
        hot.append(at, value)
    assert hot.points() == [(0.0, 90.0), (10.0, 65.0)]  # the spike within the first slot is kept
    link = Ring(4, step_s=10.0, keep_low=True)
    for at, value in ((0.0, 1.0), (3.0, 0.0), (6.0, 1.0)):
        link.append(at, value)
    assert link.points() == [(0.0, 0.0)]  # a link down for a moment shows as down


def test_a_ring_refuses_zero_slots() -> None:
    with pytest.raises(ValueError, match="at least one slot"):
        Ring(0, step_s=10.0)


def test_the_chip_table_and_link_state_feed_every_series() -> None:
    history = NodeHistory()
    history.record("npu_smi_info", table(4, 70.0, aicore=0.25, used=16.0, total=64.0), at=1000.0)
    history.record("hccn_link", [chip_sample("npu_roce_link_up", 4, 0.0)], at=1005.0)
    series = history.series(4, 0, now=1010.0)
    assert series is not None
    assert series.temperature == [(1000.0, 70.0)]
    assert series.aicore == [(1000.0, 0.25)]
    assert series.hbm == [(1000.0, 0.25)]  # used / total
    assert series.link == [(1005.0, 0.0)]
    assert history.series(5, 0, now=1010.0) is None


def test_other_sources_and_unaddressed_samples_are_ignored() -> None:
    history = NodeHistory()
    history.record("npu_smi_power", table(1, 50.0), at=10.0)  # not a history source
    history.record("npu_smi_info", [Sample("npu_chips", (), 8.0),
                                    Sample("npu_temperature_celsius", label_pairs(npu="x", chip=0), 50.0)], at=10.0)
    assert history.chips() == []


def test_the_window_is_the_last_hour() -> None:
    history = NodeHistory()
    for minute in range(0, 121, 10):
        history.record("npu_smi_info", table(0, float(minute)), at=minute * 60.0)
    series = history.series(0, 0, now=120 * 60.0)
    assert series is not None
    assert [value for _, value in series.temperature] == [60.0, 70.0, 80.0, 90.0, 100.0, 110.0, 120.0]


def test_memory_is_bounded_in_chips_and_points() -> None:
    history = NodeHistory(max_chips=16, points=360)
    for second in range(0, 2 * int(HOUR_S), 10):  # two hours of 32 chips
        samples = [sample for npu in range(32) for sample in table(npu, 50.0)]
        history.record("npu_smi_info", samples, at=float(second))
    assert len(history.chips()) == 16
    rings = [ring for rings in history._chips.values() for ring in rings.values()]
    assert len(rings) == 16 * len(SERIES)
    assert all(ring.size == 360 and len(ring) <= 360 for ring in rings)


def test_a_chip_silent_for_an_hour_makes_room_for_a_new_one() -> None:
    history = NodeHistory(max_chips=2)
    history.record("npu_smi_info", table(0, 50.0) + table(1, 50.0), at=0.0)
    history.record("npu_smi_info", table(2, 50.0), at=600.0)  # full, and nobody silent for an hour
    assert history.chips() == [(0, 0), (1, 0)]
    history.record("npu_smi_info", table(1, 50.0), at=HOUR_S)
    history.record("npu_smi_info", table(2, 50.0), at=HOUR_S + 10)  # NPU 0 silent for an hour: replaced
    assert history.chips() == [(1, 0), (2, 0)]


def test_the_store_listener_records_each_successful_round() -> None:
    now = [100.0]
    store = SnapshotStore(lambda: now[0])
    history = NodeHistory()
    store.add_listener(history.listen)
    store.register("npu_smi_info", 10.0)
    store.register("npu_smi_power", 10.0)
    store.put_success("npu_smi_info", table(3, 61.0), None, 99.0, 1.0)
    store.put_success("npu_smi_power", table(3, 99.0), None, 99.0, 1.0)
    store.put_failure("npu_smi_info", "timeout", "npu-smi timed out", 105.0, 5.0)
    now[0] = 120.0
    store.put_success("npu_smi_info", table(3, 63.0), None, 119.0, 1.0)
    series = history.series(3, 0, now=120.0)
    assert series is not None
    assert series.temperature == [(100.0, 61.0), (120.0, 63.0)]
