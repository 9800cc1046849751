"""``StoreReader``: the agent's stored records read as ``check``'s readings, failures worded as the tool reader's."""

from __future__ import annotations

from agent.core.snapshot import SnapshotStore
from agent.health.checks_node import tool_error_kind
from agent.health.store_reader import StoreReader, TwoRounds
from collectors import hccn_stat, npu_smi_health
from collectors.base import ChipRef

CHIP0, CHIP1 = ChipRef(0, 0), ChipRef(1, 0)


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


def _store(clock: Clock) -> SnapshotStore:
    store = SnapshotStore(clock)
    store.register("npu_smi_health", 10.0)
    store.register("hccn_stat", 30.0)
    return store


def test_a_chip_reads_its_own_record_and_a_missing_chip_is_no_reading() -> None:
    clock = Clock()
    store = _store(clock)
    store.put_success("npu_smi_health", [], {CHIP0: ["record of 0"]}, clock.now, 0.1)
    reader = StoreReader(store, max_chips=64, clock=clock)
    assert reader.read(npu_smi_health.SOURCE, CHIP0, parse=lambda _text: None).value == "record of 0"
    assert reader.read(npu_smi_health.SOURCE, CHIP0).value == ["record of 0"]  # the Source's own sequence
    missing = reader.read(npu_smi_health.SOURCE, CHIP1)
    assert not missing.ok and "NPU 1" in str(missing.error)


def test_a_failed_run_is_an_error_in_the_tool_readers_words() -> None:
    clock = Clock()
    store = _store(clock)
    store.put_success("npu_smi_health", [], {CHIP0: ["old"], CHIP1: ["old"]}, clock.now, 0.1)
    clock.now += 10
    store.put_failure("npu_smi_health", "timeout", "npu-smi: no answer within 10s (killed)", clock.now, 10.0)
    reader = StoreReader(store, max_chips=64, clock=clock)
    reading = reader.read(npu_smi_health.SOURCE, CHIP0)
    assert not reading.ok and tool_error_kind(str(reading.error)) == "hung"  # never the stale record
    store.put_failure("npu_smi_health", "missing_tool", "npu-smi: not found", clock.now, 0.0)
    assert tool_error_kind(str(reader.read(npu_smi_health.SOURCE, CHIP0).error)) == "missing"


def test_a_run_that_failed_for_one_chip_keeps_the_others() -> None:
    clock = Clock()
    store = _store(clock)
    store.put_success("npu_smi_health", [], {CHIP0: ["fresh"]}, clock.now, 0.1)
    store.put_failure("npu_smi_health", "exit", "npu-smi exited 1", clock.now, 0.1)
    reader = StoreReader(store, max_chips=64, clock=clock)
    assert reader.read(npu_smi_health.SOURCE, CHIP0).value == ["fresh"]
    assert tool_error_kind(str(reader.read(npu_smi_health.SOURCE, CHIP1).error)) == "failed"


def test_stale_records_and_unconfigured_sources_are_no_reading() -> None:
    clock = Clock()
    store = _store(clock)
    store.put_success("npu_smi_health", [], {CHIP0: ["r"]}, clock.now, 0.1)
    clock.now += 31  # over 3 x 10 s
    reader = StoreReader(store, max_chips=64, clock=clock)
    assert "stale" in str(reader.read(npu_smi_health.SOURCE, CHIP0).error)
    assert "not collected" in str(reader.read(hccn_stat.SOURCE, CHIP0).error)  # registered, never run
    store.unregister("hccn_stat")
    assert "disabled" in str(reader.read(hccn_stat.SOURCE, CHIP0).error)


def test_counters_are_read_from_the_last_two_rounds() -> None:
    """The RoCE counters' first read is the round before the latest, the second the latest, so a counter
    that rose between two collection rounds is seen rising; the readings are as far apart as the runs."""
    clock = Clock()
    store = _store(clock)
    rounds = TwoRounds()
    store.put_success("hccn_stat", [], {CHIP0: "before"}, clock.now, 0.1)
    first = StoreReader(store, max_chips=64, clock=clock, rounds=rounds)
    assert [first.read(hccn_stat.SOURCE, CHIP0).value for _ in range(2)] == ["before", "before"]
    clock.now += 30
    store.put_success("hccn_stat", [], {CHIP0: "after"}, clock.now, 0.1)
    second = StoreReader(store, max_chips=64, clock=clock, rounds=rounds)
    one, two = second.read(hccn_stat.SOURCE, CHIP0), second.read(hccn_stat.SOURCE, CHIP0)
    assert (one.value, two.value) == ("before", "after")
    assert abs((two.at - one.at) - 30.0) < 1e-6
