"""DCMI in collection without a process: the plans (DCMI readings -> the npu-smi parsers' records), the
backend's fallbacks, the runner choosing DCMI or the tool per reading, and the self-metrics.

The calls are answered in process by the fake library's formulas (tests.support.dcmi_calls); the tool,
where a test needs one, is a stubbed ``run_tool``. A sample must not depend on who read it."""

from __future__ import annotations

import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from typing import Any

import pytest

from agent.core import collect
from agent.core.backend import TOOL, Fallback
from agent.core.collect import SourceRunner, ToolSettings
from agent.core.snapshot import SnapshotStore
from agent.core.tool_runner import RunResult, ToolMissing
from agent.dcmi import metrics
from agent.dcmi.backend import DcmiBackend
from agent.dcmi.trust import TrustCheck, side_by_side
from collectors import npu_smi_board, npu_smi_common, npu_smi_health, npu_smi_info, npu_smi_usages, sources
from collectors.base import ChipRef, CollectContext, Source
from collectors.bounds import MIB
from collectors.dcmi import plans
from collectors.dcmi.errors import DcmiError
from collectors.npu_smi_info_records import InfoTable
from tests.support import fake_dcmi as fake
from tests.support.dcmi_calls import FakeCalls

# chip i of the fake lists card i, device 0, logic (i + 3) % 8
CARD7 = ChipRef(npu=7, chip=0, logic_id=2)


def _backend(calls: FakeCalls) -> DcmiBackend:
    return DcmiBackend(calls)  # type: ignore[arg-type]  # FakeCalls has DcmiClient's call and counts


# --- plans


def test_info_table_carries_every_chip_in_npu_smi_units() -> None:
    calls = FakeCalls(chips=8)
    (table,) = plans.read_info(calls, plans.chip_ids(calls("chips")))
    assert [(row.npu, row.chip) for row in table.chips] == [(card, 0) for card in range(8)]
    row = table.chips[7]  # logic id 2, physical id 7 (itself another chip's logical id)
    assert row.device_id == 2 and row.phy_id == 7 and row.name == "910B3" and row.bus_id == "0000:82:00.0"
    assert row.health == "Alarm"
    assert row.power_watts == 102.0 and row.temperature_celsius == 42.0
    assert row.aicore_ratio == fake.expected_utilization(2, 2) / 100
    assert row.hbm_total_bytes == fake.expected_hbm(2)["memory_size"] * MIB
    assert row.hbm_used_bytes == fake.expected_hbm(2)["memory_usage"] * MIB
    assert row.memory_used_bytes == (32768 + 2 * 512 - (16384 + 2)) * MIB
    assert table.process_section and [(p.npu, p.pid) for p in table.processes if p.npu == 7] == [(7, 1020), (7, 1021)]


def test_a_reading_the_chip_lacks_is_absent_and_the_health_word_is_required() -> None:
    calls = FakeCalls()
    calls.unsupported |= {"power", "processes"}
    calls.codes["utilization"] = -8255  # not supported on this chip
    (table,) = plans.read_info(calls, plans.chip_ids(calls("chips")))
    assert all(row.power_watts is None and row.aicore_ratio is None for row in table.chips)
    assert not table.process_section and not table.processes
    (usages,) = plans.read_usages(calls, 2)
    assert usages.aicore_usage_ratio is None and usages.hbm_capacity_bytes == fake.expected_hbm(2)["memory_size"] * MIB
    calls.unsupported.add("health")
    with pytest.raises(Exception, match="no dcmi_health"):
        plans.read_info(calls, plans.chip_ids(calls("chips")))
    calls.codes["temperature"] = -8006  # a real failure is not "absent": the tool serves the reading
    with pytest.raises(DcmiError):
        plans.read_common(calls, 2)


def test_v2_only_library_leaves_the_table_and_mapping_to_npu_smi() -> None:
    calls = FakeCalls(v2_only=True)
    with pytest.raises(plans.NeedsIds):
        plans.read_info(calls, plans.chip_ids(calls("chips")))
    with pytest.raises(plans.NeedsIds):
        plans.read_mapping(calls, plans.chip_ids(calls("chips")))


def test_mapping_and_chip_refs_from_dcmi() -> None:
    calls = FakeCalls(chips=16, per_card=2)
    chips = plans.chip_ids(calls("chips"))
    mapping = plans.read_mapping(calls, chips)
    (table,) = plans.read_info(calls, chips)
    refs = npu_smi_info.chip_refs(table, mapping)
    assert refs[3] == ChipRef(npu=1, chip=1, logic_id=(3 + 3) % 16, phy_id=3)
    assert mapping[0].name == "Ascend 910B3"


def test_samples_do_not_depend_on_the_backend() -> None:
    """The health source's samples from DCMI equal those from npu-smi's text saying the same."""
    (from_dcmi,) = plans.read_health(FakeCalls(), 2)
    from_tool = npu_smi_health.parse_records("Health Status : Alarm\nError Code : 80E01820 80E01821\n")
    context = CollectContext()
    assert npu_smi_health.samples([from_dcmi], CARD7, context) == npu_smi_health.samples(from_tool, CARD7, context)
    assert npu_smi_health.samples([from_dcmi], CARD7, context)


# --- backend


def test_backend_turns_dcmi_problems_into_fallbacks() -> None:
    calls = FakeCalls()
    backend = _backend(calls)
    assert backend.serves(npu_smi_health.SOURCE) and not backend.serves(npu_smi_board.SOURCE)
    calls.worker["health"] = "timeout"
    with pytest.raises(Fallback) as hung:
        backend.read(npu_smi_health.SOURCE, CARD7)
    assert hung.value.reason == "timeout" and "helper timeout" in str(hung.value)
    calls.worker["health"] = "died"
    with pytest.raises(Fallback) as died:
        backend.read(npu_smi_health.SOURCE, CARD7)
    assert died.value.reason == "exit"
    del calls.worker["health"]
    calls.unsupported.add("error_codes")
    for _ in range(3):
        with pytest.raises(Fallback, match="no dcmi_error_codes"):
            backend.read(npu_smi_health.SOURCE, CARD7)
    assert calls.count["error_codes"] == 1  # remembered: the tool serves it from then on, without asking
    assert backend.on_tool() == {"npu_smi_health": "libdcmi.so has no dcmi_error_codes"}


def test_backend_sends_a_plans_calls_in_one_round_trip_from_its_second_read() -> None:
    calls = FakeCalls()
    backend = _backend(calls)
    first = backend.read(npu_smi_usages.SOURCE, CARD7)
    assert calls.batches == 0 and calls.direct > 10  # the first read learns the plan's calls one by one
    direct = calls.direct
    assert backend.read(npu_smi_usages.SOURCE, CARD7) == first
    assert (calls.batches, calls.direct) == (1, direct)
    # the table of every chip: the chip list, then one batch
    table = backend.read(npu_smi_info.SOURCE, None)
    direct, batches = calls.direct, calls.batches
    assert backend.read(npu_smi_info.SOURCE, None) == table
    assert (calls.direct - direct, calls.batches - batches) == (1, 1)


def test_backend_reads_what_cannot_change_once_per_helper_start() -> None:
    calls = FakeCalls()
    backend = _backend(calls)
    table = backend.read(npu_smi_info.SOURCE, None)
    assert {name: calls.count[name] for name in plans.STATIC_CALLS} == {"chip_info": 8, "pcie": 8}
    for _ in range(3):
        assert backend.read(npu_smi_info.SOURCE, None) == table
    assert backend.read(npu_smi_common.SOURCE, CARD7)  # the common block's chip name comes from the same answer
    assert {name: calls.count[name] for name in plans.STATIC_CALLS} == {"chip_info": 8, "pcie": 8}
    calls.starts += 1  # a new helper (after a crash, a driver reload): read them again, once
    for _ in range(2):
        assert backend.read(npu_smi_info.SOURCE, None) == table
    assert {name: calls.count[name] for name in plans.STATIC_CALLS} == {"chip_info": 16, "pcie": 16}


def test_backend_batches_what_a_plan_cut_short_did_not_reach_once_it_gets_there() -> None:
    calls = FakeCalls()
    backend = _backend(calls)
    calls.codes["health"] = -8012  # not ready: the plan stops at its first call
    with pytest.raises(Fallback, match="8012"):
        backend.read(npu_smi_health.SOURCE, CARD7)
    del calls.codes["health"]
    healthy = backend.read(npu_smi_health.SOURCE, CARD7)  # health batched, error_codes on its own
    assert (calls.batches, calls.count["error_codes"], calls.direct) == (1, 1, 3)  # + chips, health
    assert backend.read(npu_smi_health.SOURCE, CARD7) == healthy
    assert (calls.batches, calls.direct) == (2, 3)
    calls.codes["health"] = -8012  # cut short again: what it would have called next is not forgotten
    with pytest.raises(Fallback, match="8012"):
        backend.read(npu_smi_health.SOURCE, CARD7)
    del calls.codes["health"]
    assert backend.read(npu_smi_health.SOURCE, CARD7) == healthy
    assert (calls.batches, calls.direct) == (4, 3)
    calls.worker["health"] = "died"  # a helper failure fails the batch: the tool serves the reading
    with pytest.raises(Fallback) as died:
        backend.read(npu_smi_health.SOURCE, CARD7)
    assert died.value.helper and calls.direct == 3


def test_backend_finds_the_logical_id_from_the_library_then_from_npu_smi() -> None:
    calls = FakeCalls()
    backend = _backend(calls)
    assert backend.logic_id(ChipRef(npu=7, chip=0)) == 2
    assert backend.logic_id(ChipRef(npu=40, chip=0, logic_id=5)) == 5
    with pytest.raises(Fallback, match="no chip npu 40"):
        backend.logic_id(ChipRef(npu=40, chip=0))
    v2 = _backend(FakeCalls(v2_only=True))
    assert v2.logic_id(CARD7) == 2  # the ChipRef's, from npu-smi info -m


# --- the runner: DCMI first, the tool per reading


@pytest.fixture
def pool() -> Iterator[ThreadPoolExecutor]:
    executor = ThreadPoolExecutor(2)
    yield executor
    executor.shutdown()


class _Tool:
    """``resolve_tool``/``run_tool`` stand-ins: ``present`` or not, answering ``text``; counts its calls."""

    def __init__(self, present: bool, text: str = "") -> None:
        self.present = present
        self.text = text
        self.runs: list[list[str]] = []

    def resolve(self, tool: str, path: str | None = None, **_: Any) -> str:
        if not self.present:
            raise ToolMissing(tool, ["PATH"])
        return f"/bin/{tool}"

    def run(self, argv: list[str], timeout: float, env: Any = None) -> RunResult:
        self.runs.append(argv)
        return RunResult(argv=tuple(argv), returncode=0, stdout=self.text, stderr="", duration_s=0.0, truncated=False)


def _runner(monkeypatch: pytest.MonkeyPatch, pool: ThreadPoolExecutor, tool: _Tool,
            reader: DcmiBackend | None) -> tuple[SourceRunner, SnapshotStore]:
    monkeypatch.setattr(collect, "resolve_tool", tool.resolve)
    monkeypatch.setattr(collect, "run_tool", tool.run)
    store = SnapshotStore(time.time)
    for source in (npu_smi_health.SOURCE, npu_smi_board.SOURCE, npu_smi_info.SOURCE, npu_smi_usages.SOURCE):
        store.register(source.name, 60.0)
    runner = SourceRunner(store, {"npu-smi": ToolSettings(None, 5.0)}, {"npu-smi": pool}, CollectContext,
                          reader=reader)
    return runner, store


def _values(store: SnapshotStore, source: Source) -> dict[tuple[str, Any], float]:
    snap = store.get(source.name)
    assert snap is not None
    return {(s.metric, s.labels): s.value for s in snap.samples}


def test_without_npu_smi_dcmi_serves_and_the_collector_is_up(monkeypatch: pytest.MonkeyPatch,
                                                              pool: ThreadPoolExecutor) -> None:
    calls = FakeCalls()
    backend = _backend(calls)
    runner, store = _runner(monkeypatch, pool, _Tool(present=False), backend)
    runner.run(npu_smi_info.SOURCE, None)
    chips = sources.chip_refs(store)
    assert len(chips) == 8 and chips[7] == ChipRef(npu=7, chip=0, phy_id=7)
    runner.run(npu_smi_health.SOURCE, chips)
    snap = store.get("npu_smi_health")
    assert snap is not None and snap.ok
    assert _values(store, npu_smi_info.SOURCE)[("npu_power_watts", (("npu", "7"), ("chip", "0")))] == 102.0
    assert backend.last_run["npu_smi_health"] == {"dcmi": 8, TOOL: 0}
    runner.run(npu_smi_board.SOURCE, chips)  # npu-smi's alone, and missing: no data, not a fault
    board = store.get("npu_smi_board")
    assert board is not None and board.no_data and board.down_reason == "no_data"
    assert "dcmi serves the chip readings" in (board.error or "")


def test_a_failing_dcmi_reading_falls_back_to_npu_smi(monkeypatch: pytest.MonkeyPatch,
                                                       pool: ThreadPoolExecutor) -> None:
    calls = FakeCalls()
    backend = _backend(calls)
    tool = _Tool(present=True, text="Health Status : Alarm\nError Code : 80E01820 80E01821\n")
    runner, store = _runner(monkeypatch, pool, tool, backend)
    runner.run(npu_smi_health.SOURCE, [CARD7])
    served_by_dcmi = _values(store, npu_smi_health.SOURCE)
    assert not tool.runs
    calls.worker["health"] = "timeout"  # the helper hung: npu-smi takes over, the collector stays up
    runner.run(npu_smi_health.SOURCE, [CARD7])
    snap = store.get("npu_smi_health")
    assert snap is not None and snap.ok
    assert tool.runs == [["/bin/npu-smi", "info", "-t", "health", "-i", "7", "-c", "0"]]
    assert _values(store, npu_smi_health.SOURCE) == served_by_dcmi
    assert backend.last_run["npu_smi_health"] == {"dcmi": 0, TOOL: 1} and backend.fallbacks["npu_smi_health"] == 1


def test_with_neither_backend_the_collector_is_down_with_dcmis_reason(monkeypatch: pytest.MonkeyPatch,
                                                                      pool: ThreadPoolExecutor) -> None:
    calls = FakeCalls()
    calls.worker["health"] = "timeout"
    runner, store = _runner(monkeypatch, pool, _Tool(present=False), _backend(calls))
    runner.run(npu_smi_health.SOURCE, [CARD7])
    snap = store.get("npu_smi_health")
    assert snap is not None and not snap.ok and snap.down_reason == "timeout"
    assert "helper timeout" in (snap.error or "") and "npu-smi: not found" in (snap.error or "")


def test_without_dcmi_a_missing_npu_smi_is_still_a_fault(monkeypatch: pytest.MonkeyPatch,
                                                          pool: ThreadPoolExecutor) -> None:
    calls = FakeCalls()
    calls.failures = 1  # the helper is down: DCMI is not serving
    runner, store = _runner(monkeypatch, pool, _Tool(present=False), _backend(calls))
    runner.run(npu_smi_board.SOURCE, [CARD7])
    board = store.get("npu_smi_board")
    assert board is not None and board.down_reason == "missing_tool"
    runner, store = _runner(monkeypatch, pool, _Tool(present=False), None)
    runner.run(npu_smi_health.SOURCE, [CARD7])
    health = store.get("npu_smi_health")
    assert health is not None and health.down_reason == "missing_tool"


def test_board_answering_no_data_does_not_hold_npu_info_back(monkeypatch: pytest.MonkeyPatch,
                                                             pool: ThreadPoolExecutor) -> None:
    runner, store = _runner(monkeypatch, pool, _Tool(present=False), _backend(FakeCalls()))
    runner.run(npu_smi_info.SOURCE, None)
    runner.run(npu_smi_board.SOURCE, sources.chip_refs(store))
    assert npu_smi_info.EVERY_CHIP not in sources.inventory(store)
    table = store.records("npu_smi_info")[0]
    assert isinstance(table, InfoTable)
    context = CollectContext(inventory=sources.inventory(store))
    assert any(s.metric == "npu_info" for s in npu_smi_info.samples(table, None, context))


def test_self_metrics_are_catalogued_and_say_who_served() -> None:
    calls = FakeCalls()
    backend = _backend(calls)
    backend.ran("npu_smi_health", {"dcmi": 6, TOOL: 2})
    calls.errors["timeout"] += 1
    out = {(s.metric, s.labels): s.value for s in metrics.samples(backend, verified=False)}
    assert out[("npuwatch_collector_backend_readings", (("collector", "npu_smi_health"), ("backend", "dcmi")))] == 6
    assert out[("npuwatch_collector_backend_readings", (("collector", "npu_smi_health"), ("backend", "tool")))] == 2
    assert out[("npuwatch_dcmi_call_errors_total", (("kind", "timeout"),))] == 1
    assert out[("npuwatch_dcmi_helper_up", ())] == 1 and out[("npuwatch_dcmi_unverified", ())] == 1
    from collectors.catalogue import CATALOGUE

    assert {metric for metric, _ in out} <= set(CATALOGUE)


# --- the trust check


def _tool_from(calls: FakeCalls, scale_hbm: float = 1.0) -> Any:
    """An npu-smi stand-in answering the same facts as the fake library (HBM sizes scaled, to plant a unit error)."""
    twin = _backend(calls)

    def npu_smi(source: Source, chip: ChipRef) -> Any:
        records = twin.read_plan(source.name, chip)
        if source.name == "npu_smi_info" and scale_hbm != 1.0:
            (table,) = records
            rows = tuple(replace(row, hbm_total_bytes=row.hbm_total_bytes * scale_hbm) for row in table.chips)
            return (replace(table, chips=rows),)
        return records

    return npu_smi


def test_trust_check_agreeing_backends_verify_and_keep_dcmi() -> None:
    backend = _backend(FakeCalls())
    check = TrustCheck(backend, None, 5.0, 3600.0)
    check.apply(side_by_side(backend, CARD7, _tool_from(FakeCalls())))
    assert check.verified is True and not check.disagreements and not backend.on_tool()
    shared = {(row.source, row.field) for row in check.last_rows if row.agree}
    assert {("npu_smi_info", "power_watts"), ("npu_smi_info", "hbm_total_bytes"),
            ("npu_smi_health", "health")} <= shared


def test_trust_check_a_unit_error_gives_the_source_back_to_npu_smi() -> None:
    backend = _backend(FakeCalls())
    check = TrustCheck(backend, None, 5.0, 3600.0)
    check.apply(side_by_side(backend, CARD7, _tool_from(FakeCalls(), scale_hbm=1 / 1024)))  # npu-smi says KB
    assert list(check.disagreements) == [("npu_smi_info", "hbm_total_bytes")]
    assert "hbm_total_bytes" in backend.on_tool()["npu_smi_info"]
    with pytest.raises(Fallback, match="disagreed"):
        backend.read(npu_smi_info.SOURCE, None)
    out = {(s.metric, s.labels) for s in metrics.samples(backend, check.verified, check.disagreements)}
    assert ("npuwatch_dcmi_field_disagreements", (("collector", "npu_smi_info"), ("field", "hbm_total_bytes"))) in out


def test_trust_check_without_npu_smi_marks_dcmi_unverified() -> None:
    backend = _backend(FakeCalls())
    check = TrustCheck(backend, None, 5.0, 3600.0)

    def missing(source: Source, chip: ChipRef) -> Any:
        raise ToolMissing("npu-smi", ["PATH"])

    check.apply(side_by_side(backend, CARD7, missing))
    assert check.verified is False and not backend.on_tool()
    assert all(row.agree is None and row.dcmi is not None for row in check.last_rows if row.field == "health")


def test_power_agreement_allows_for_the_time_between_reads() -> None:
    from collectors.dcmi.compare import Field, _agree

    assert _agree(Field("power_watts", 5.0, 0.1), 300.0, 280.0) and not _agree(Field("power_watts", 5.0, 0.1), 300, 250)
    assert _agree(Field("health"), "OK", "ok") and _agree(Field("x"), None, 1.0) is None
