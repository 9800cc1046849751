"""The snapshot store's freshness rule: data older than 3x its interval is not exported."""

from __future__ import annotations

import pytest

from agent.core.snapshot import ERROR_REASONS, SnapshotStore, SourceSnapshot
from collectors.base import Sample


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.mark.parametrize(("age", "fresh"), [(0.0, True), (29.99, True), (30.0, True), (30.01, False),
                                             (20.01, True), (45.0, False)])
def test_data_is_fresh_up_to_three_intervals(age: float, fresh: bool) -> None:
    clock = Clock()
    store = SnapshotStore(clock)
    store.register("npu_smi_usages", 10.0)
    store.put_success("npu_smi_usages", [Sample("npu_chips", (), 8.0)], ["record"], clock.now, 0.1)
    store.put_failure("npu_smi_usages", "timeout", "hung", clock.now, 10.0)  # later runs fail
    clock.now += age
    snap = store.get("npu_smi_usages")
    assert snap is not None and snap.fresh(clock.now) is fresh
    assert (store.records("npu_smi_usages") is not None) is fresh


def test_an_explicit_max_age_and_none_are_honoured() -> None:
    clock = Clock()
    store = SnapshotStore(clock)
    store.register("probes", 15.0, max_age_s=None)
    store.register("host", 15.0, max_age_s=5.0)
    for name in ("probes", "host"):
        store.put_success(name, [], ["r"], clock.now, 0.0)
    clock.now += 5.5
    assert store.records("probes") == ["r"]  # never expires
    assert store.records("host") is None


class StepClock:
    def __init__(self, now: float = 1000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


SAMPLE = Sample("npu_chip_power_watts", (("npu", "0"),), 93.5)
ZERO_ERRORS = dict.fromkeys(ERROR_REASONS, 0)


def registered(clock: StepClock | None = None) -> SnapshotStore:
    store = SnapshotStore(clock or StepClock())
    store.register("temp", 15.0)
    return store


def test_a_new_store_is_empty_at_version_zero() -> None:
    store = SnapshotStore(StepClock())
    assert store.version == 0
    assert store.all() == []
    assert store.get("temp") is None


def test_register_starts_not_run_and_re_register_keeps_the_state() -> None:
    clock = StepClock()
    store = SnapshotStore(clock)
    store.register("temp", 15.0)
    assert store.version == 1
    assert store.get("temp") == SourceSnapshot("temp", 15.0, 45.0)
    assert store.get("temp").down_reason == "not_run"  # type: ignore[union-attr]
    assert store.get("temp").errors == ZERO_ERRORS  # type: ignore[union-attr]
    store.put_success("temp", [SAMPLE], {"rec": 1}, 990.0, 0.5)
    store.register("temp", 30.0, None)
    assert store.version == 3
    snap = store.get("temp")
    assert snap is not None
    assert (snap.interval_s, snap.max_age_s, snap.ok, snap.samples) == (30.0, None, True, (SAMPLE,))
    store.register("probe", 3600.0, 7200.0)
    assert store.get("probe") == SourceSnapshot("probe", 3600.0, 7200.0)
    assert [snap.source for snap in store.all()] == ["temp", "probe"]


def test_unregister_counts_a_change_only_when_something_went() -> None:
    store = registered()
    store.unregister("temp")
    assert store.version == 2
    assert store.get("temp") is None
    store.unregister("temp")
    assert store.version == 2


def test_put_success_records_everything_and_notifies() -> None:
    clock = StepClock(1000.0)
    store = registered(clock)
    seen: list[SourceSnapshot] = []
    store.add_listener(seen.append)
    store.put_failure("temp", "timeout", "slow", 900.0, 10.0)
    store.put_success("temp", [SAMPLE], {"rec": 1}, 995.0, 0.25)
    expected = SourceSnapshot("temp", 15.0, 45.0, started_at=995.0, duration_s=0.25, ok=True, error=None,
                              error_reason=None, no_data=False, down_reason=None, last_success=1000.0,
                              samples=(SAMPLE,), records={"rec": 1}, errors={**ZERO_ERRORS, "timeout": 1})
    assert store.get("temp") == expected
    assert seen == [expected]
    assert store.version == 3
    assert store.records("temp") == {"rec": 1}


def test_listeners_are_called_only_for_successes_and_can_be_cleared() -> None:
    store = registered()
    seen: list[str] = []
    store.add_listener(lambda snap: seen.append(snap.source))
    store.put_failure("temp", "exit", "rc 1", 1.0, 1.0)
    store.put_no_data("temp", "absent", 1.0, 1.0)
    store.put_degraded("temp", "state file")
    assert seen == []
    store.put_success("temp", [], None, 1.0, 1.0)
    assert seen == ["temp"]
    store.clear_listeners()
    store.put_success("temp", [], None, 1.0, 1.0)
    assert seen == ["temp"]


def test_put_failure_counts_the_reason_and_keeps_the_last_samples() -> None:
    store = registered(StepClock(1000.0))
    store.put_success("temp", [SAMPLE], "records", 990.0, 1.0)
    store.put_failure("temp", "parse", "bad line", 1005.0, 2.0)
    store.put_failure("temp", "parse", "bad again", 1020.0, 3.0)
    expected = SourceSnapshot("temp", 15.0, 45.0, started_at=1020.0, duration_s=3.0, ok=False, error="bad again",
                              error_reason="parse", no_data=False, down_reason="parse", last_success=1000.0,
                              samples=(SAMPLE,), records="records", errors={**ZERO_ERRORS, "parse": 2})
    assert store.get("temp") == expected
    assert store.version == 4


def test_put_failure_after_no_data_clears_no_data() -> None:
    store = registered()
    store.put_no_data("temp", "absent", 1.0, 1.0)
    store.put_failure("temp", "missing_tool", "gone", 2.0, 1.0)
    snap = store.get("temp")
    assert snap is not None and snap.no_data is False and snap.down_reason == "missing_tool"


def test_put_failure_refuses_an_unknown_reason_without_a_change() -> None:
    store = registered()
    with pytest.raises(ValueError, match="unknown error reason 'oops'"):
        store.put_failure("temp", "oops", "x", 1.0, 1.0)
    assert store.version == 1


def test_put_degraded_keeps_samples_and_counts_no_error() -> None:
    store = registered(StepClock(1000.0))
    store.put_success("temp", [SAMPLE], "records", 990.0, 1.0)
    store.put_degraded("temp", "state file unwritable")
    expected = SourceSnapshot("temp", 15.0, 45.0, started_at=990.0, duration_s=1.0, ok=False,
                              error="state file unwritable", error_reason=None, no_data=False,
                              down_reason="degraded", last_success=1000.0, samples=(SAMPLE,), records="records")
    assert store.get("temp") == expected
    assert store.version == 3


def test_put_no_data_empties_the_samples() -> None:
    store = registered(StepClock(1000.0))
    store.put_failure("temp", "timeout", "slow", 900.0, 10.0)
    store.put_success("temp", [SAMPLE], "records", 990.0, 1.0)
    store.put_no_data("temp", "no RoCE port", 1001.0, 0.5)
    expected = SourceSnapshot("temp", 15.0, 45.0, started_at=1001.0, duration_s=0.5, ok=False,
                              error="no RoCE port", error_reason=None, no_data=True, down_reason="no_data",
                              last_success=1000.0, samples=(), records=None, errors={**ZERO_ERRORS, "timeout": 1})
    assert store.get("temp") == expected
    assert store.version == 4
    store.put_no_data("temp", "no chips", 1002.0, 0.5, reason="no_inventory")
    assert store.get("temp").down_reason == "no_inventory"  # type: ignore[union-attr]


@pytest.mark.parametrize("reason", [*ERROR_REASONS, "up", "not_a_reason"])
def test_put_no_data_refuses_error_and_unknown_reasons(reason: str) -> None:
    store = registered()
    with pytest.raises(ValueError, match=f"not a no-data reason: '{reason}'"):
        store.put_no_data("temp", "x", 1.0, 1.0, reason=reason)
    assert store.version == 1


@pytest.mark.parametrize("reason", ["no_data", "no_inventory", "degraded", "not_run"])
def test_put_no_data_accepts_every_non_error_down_reason(reason: str) -> None:
    store = registered()
    store.put_no_data("temp", "x", 1.0, 1.0, reason=reason)
    assert store.get("temp").down_reason == reason  # type: ignore[union-attr]


def test_count_rejections_adds_up() -> None:
    store = registered()
    store.count_rejections("temp", 3)
    store.count_rejections("temp", 4)
    assert store.get("temp") == SourceSnapshot("temp", 15.0, 45.0, rejections=7)
    assert store.version == 3


@pytest.mark.parametrize("call", [
    lambda s: s.put_success("nope", [], None, 1.0, 1.0),
    lambda s: s.put_failure("nope", "exit", "x", 1.0, 1.0),
    lambda s: s.put_degraded("nope", "x"),
    lambda s: s.put_no_data("nope", "x", 1.0, 1.0),
    lambda s: s.count_rejections("nope", 1),
])
def test_an_unregistered_collector_is_refused_by_name(call: object) -> None:
    store = registered()
    with pytest.raises(KeyError, match="collector 'nope' was never registered"):
        call(store)  # type: ignore[operator]
    assert store.version == 1


def test_records_only_while_fresh_and_never_before_a_success() -> None:
    clock = StepClock(1000.0)
    store = registered(clock)
    assert store.records("temp") is None
    assert store.records("unknown") is None
    store.put_success("temp", [SAMPLE], {"rec": 1}, 999.0, 1.0)
    clock.now = 1045.0
    assert store.records("temp") == {"rec": 1}
    clock.now = 1045.5
    assert store.records("temp") is None
    assert store.clock is clock


def test_a_snapshot_without_success_is_never_fresh() -> None:
    assert not SourceSnapshot("temp", 15.0, None).fresh(0.0)
    assert SourceSnapshot("temp", 15.0, None, last_success=0.0).fresh(1e12)


def test_every_put_resets_what_the_previous_state_left() -> None:
    store = registered(StepClock(1000.0))
    store.put_failure("temp", "timeout", "slow", 1.0, 1.0)
    store.put_degraded("temp", "state file")
    assert store.get("temp").error_reason is None  # type: ignore[union-attr]
    store.put_failure("temp", "exit", "rc 1", 1.0, 1.0)
    store.put_no_data("temp", "absent", 1.0, 1.0)
    assert store.get("temp").error_reason is None  # type: ignore[union-attr]
    store.put_success("temp", [SAMPLE], None, 1.0, 1.0)
    snap = store.get("temp")
    assert snap is not None and snap.no_data is False and snap.error_reason is None


def test_re_register_recomputes_the_default_max_age() -> None:
    store = registered()
    store.register("temp", 30.0)
    assert store.get("temp").max_age_s == 90.0  # type: ignore[union-attr]
