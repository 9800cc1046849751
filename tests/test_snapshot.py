"""The snapshot store's freshness rule: data older than 3x its interval is not exported."""

from __future__ import annotations

import pytest

from agent.core.snapshot import SnapshotStore
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
