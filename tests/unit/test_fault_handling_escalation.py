"""Escalation from the agent's own history (agent.handling): occurrences, durations, held manual separations,
their release and clearing, the state file across restarts, and the samples the health collector exports."""

from __future__ import annotations

import argparse
import errno
import os
import stat
import tempfile
from pathlib import Path

import pytest

from agent.handling import cli as faults_cli
from agent.handling.escalation import ChipHistory, Held, step
from agent.handling.history import FaultHistory
from agent.handling.levels import FaultLevels
from collectors import npu_smi_health
from collectors.base import ChipRef, CollectContext
from collectors.fault_levels import DurationRule, FaultTable, FrequencyRule, default_table

TWICE_A_DAY = "80E01801"  # RestartBusiness; twice in 24 h -> ManuallySeparateNPU
LINK_DOWN = "81078603"  # NotHandleFault; 20 s -> PreSeparateNPU; 5 times in 24 h -> ManuallySeparateNPU (48 h release)
HBM_ECC = "80C98000"  # RestartRequest; twice in 24 h -> ManuallySeparateNPU
CHIP = ChipRef(3, 0)


def polls(table: FaultTable, seen: list[tuple[float, list[str]]], health: str = "Warning") -> list[tuple[ChipHistory,
                                                                                                         dict[str, str],
                                                                                                         str | None]]:
    history, out = ChipHistory(), []
    for now, codes in seen:
        history, levels = step(table, history, health, codes, now)
        out.append((history, dict(levels.codes), levels.chip))
    return out


def test_a_code_seen_by_consecutive_polls_is_one_occurrence() -> None:
    result = polls(default_table(), [(0, [TWICE_A_DAY]), (60, [TWICE_A_DAY]), (120, [TWICE_A_DAY])])
    assert [levels for _, levels, _ in result] == [{TWICE_A_DAY: "RestartBusiness"}] * 3
    assert result[-1][0].seen == {TWICE_A_DAY: (0.0,)}


def test_a_code_that_becomes_active_twice_in_its_window_is_manually_separated_and_held() -> None:
    result = polls(default_table(), [(0, [TWICE_A_DAY]), (60, []), (120, [TWICE_A_DAY]), (180, [])])
    assert [levels for _, levels, _ in result] == [{TWICE_A_DAY: "RestartBusiness"}, {},
                                                   {TWICE_A_DAY: "ManuallySeparateNPU"}, {}]
    assert [chip for _, _, chip in result] == ["RestartBusiness", None, "ManuallySeparateNPU", "ManuallySeparateNPU"]
    assert result[-1][0].held == {TWICE_A_DAY: Held(120.0, None)}


def test_two_occurrences_further_apart_than_the_window_do_not_escalate() -> None:
    day = 86400.0
    result = polls(default_table(), [(0, [TWICE_A_DAY]), (60, []), (day + 1, [TWICE_A_DAY])])
    assert result[-1][1] == {TWICE_A_DAY: "RestartBusiness"}
    result = polls(default_table(), [(0, [TWICE_A_DAY]), (60, []), (day, [TWICE_A_DAY])])
    assert result[-1][1] == {TWICE_A_DAY: "ManuallySeparateNPU"}


def test_a_lasting_code_escalates_once_it_has_lasted_past_its_timeout_by_the_polls() -> None:
    result = polls(default_table(), [(0, [LINK_DOWN]), (20, [LINK_DOWN]), (21, [LINK_DOWN]), (80, [])])
    assert [levels for _, levels, _ in result] == [{LINK_DOWN: "NotHandleFault"}, {LINK_DOWN: "NotHandleFault"},
                                                   {LINK_DOWN: "PreSeparateNPU"}, {}]


def test_a_duration_level_stays_until_the_code_has_stayed_clear_past_its_recover_timeout() -> None:
    # 81078603: PreSeparateNPU after 20 s, RecoverTimeout 60 s
    seen = [(0, [LINK_DOWN]), (30, [LINK_DOWN]), (40, []), (70, [LINK_DOWN]), (80, []), (140, []), (141, [])]
    chips = [chip for _, _, chip in polls(default_table(), seen)]
    assert chips == ["NotHandleFault", "PreSeparateNPU", "PreSeparateNPU", "PreSeparateNPU", "PreSeparateNPU",
                     "PreSeparateNPU", None]


def test_a_release_window_frees_a_held_separation_when_the_code_stays_away() -> None:
    table = FaultTable({}, (FrequencyRule(frozenset({"AB"}), 100.0, 2, "ManuallySeparateNPU", release_s=1000.0),))
    seen = [(0, ["AB"]), (10, []), (20, ["AB"]), (30, []), (1021, []), (1030, []), (1031, [])]
    chips = [chip for _, _, chip in polls(table, seen)]
    # held at 20; the window counts from the last recovery (30), not from the occurrence
    assert chips == ["SubHealthFault", None, "ManuallySeparateNPU", "ManuallySeparateNPU", "ManuallySeparateNPU",
                     "ManuallySeparateNPU", None]


def test_the_most_severe_level_of_a_chip_is_its_level() -> None:
    table = FaultTable({"A": "RestartRequest", "B": "RestartNPU"}, (), (DurationRule(frozenset({"A"}), 5.0,
                                                                                   "SeparateNPU"),))
    result = polls(table, [(0, ["A", "B"]), (6, ["A", "B"])])
    assert [chip for _, _, chip in result] == ["RestartNPU", "SeparateNPU"]


def test_history_survives_a_restart_and_a_clear_releases_the_chip(tmp_path: Path) -> None:
    path = tmp_path / "fault_history.json"
    clock = iter([0.0, 60.0, 120.0, 180.0, 240.0])
    first = FaultLevels(default_table(), FaultHistory(path), lambda: next(clock))
    first(CHIP, "Warning", [TWICE_A_DAY])
    first(CHIP, "Warning", [])
    restarted = FaultLevels(default_table(), FaultHistory(path), lambda: next(clock))
    assert restarted(CHIP, "Warning", [TWICE_A_DAY]).chip == "ManuallySeparateNPU"
    assert restarted(CHIP, "OK", []).chip == "ManuallySeparateNPU"
    args = argparse.Namespace(faults_command="clear", npu=3, chip=None, json=False)
    config = argparse.Namespace(state_dir=str(tmp_path))
    assert faults_cli.main(args, config) == faults_cli.EXIT_OK
    assert faults_cli.main(args, config) == faults_cli.EXIT_NOTHING
    assert restarted(CHIP, "OK", []).chip is None


def test_a_clear_of_another_npu_leaves_the_chip_held(tmp_path: Path) -> None:
    history = FaultHistory(tmp_path / "fault_history.json")
    history.update(lambda chips: {**chips, "3:0": ChipHistory({}, {}, {TWICE_A_DAY: Held(0.0)}),
                                  "13:0": ChipHistory({}, {}, {TWICE_A_DAY: Held(0.0)})})
    config = argparse.Namespace(state_dir=str(tmp_path))
    assert faults_cli.main(argparse.Namespace(faults_command="clear", npu=1, chip=None), config) == 1
    assert faults_cli.main(argparse.Namespace(faults_command="clear", npu=3, chip=1), config) == 1
    assert faults_cli.main(argparse.Namespace(faults_command="clear", npu=3, chip=0), config) == 0
    assert set(history.read()) == {"13:0"}


def test_an_unwritable_state_directory_keeps_the_history_in_memory(tmp_path: Path) -> None:
    blocked = tmp_path / "file"
    blocked.write_text("", encoding="utf-8")
    clock = iter([0.0, 60.0, 120.0])
    levels = FaultLevels(default_table(), FaultHistory(blocked / "fault_history.json"), lambda: next(clock))
    levels(CHIP, "Warning", [TWICE_A_DAY])
    levels(CHIP, "Warning", [])
    assert levels(CHIP, "Warning", [TWICE_A_DAY]).chip == "ManuallySeparateNPU"


def _full_disk(monkeypatch: pytest.MonkeyPatch) -> None:
    def no_space(*args: object, **kwargs: object) -> tuple[int, str]:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(tempfile, "mkstemp", no_space)


def test_while_the_state_file_cannot_be_written_the_memory_and_not_the_stale_file_is_the_history(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "fault_history.json"
    now = [0.0]
    levels = FaultLevels(default_table(), FaultHistory(path), lambda: now[0])
    other = ChipRef(5, 0)
    levels(other, "Warning", [TWICE_A_DAY])  # the file exists, holding another chip's history
    stale = path.read_text(encoding="utf-8")
    _full_disk(monkeypatch)
    for now[0], codes in ((100.0, [HBM_ECC]), (160.0, []), (220.0, [HBM_ECC])):
        judged = levels(CHIP, "Warning", codes)
    assert judged.chip == "ManuallySeparateNPU"
    for now[0] in (300.0, 315.0, 330.0):
        judged = levels(other, "Warning", [LINK_DOWN])
    assert judged.codes == {LINK_DOWN: "PreSeparateNPU"}
    assert path.read_text(encoding="utf-8") == stale
    assert levels.history.unsaved and "3:0" in levels.history.read()
    monkeypatch.undo()  # space again: the next poll writes what the memory held
    now[0] = 400.0
    levels(CHIP, "Warning", [])
    assert not levels.history.unsaved
    assert set(FaultHistory(path).read()["3:0"].held) == {HBM_ECC}


def test_a_clear_written_by_another_process_while_the_agent_cannot_write_is_taken(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "fault_history.json"
    now = [0.0]
    levels = FaultLevels(default_table(), FaultHistory(path), lambda: now[0])
    for now[0], codes in ((0.0, [HBM_ECC]), (60.0, []), (120.0, [HBM_ECC])):
        levels(CHIP, "Warning", codes)
    with monkeypatch.context() as patch:
        _full_disk(patch)
        now[0] = 180.0
        assert levels(CHIP, "Warning", [LINK_DOWN]).chip == "ManuallySeparateNPU"
        assert levels.history.unsaved
    clear = argparse.Namespace(faults_command="clear", npu=3, chip=None, json=False)
    assert faults_cli.main(clear, argparse.Namespace(state_dir=str(tmp_path))) == faults_cli.EXIT_OK
    now[0] = 240.0
    assert levels(CHIP, "OK", []).chip is None


def test_a_clear_that_cannot_be_written_says_so_and_fails(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "fault_history.json"
    FaultHistory(path).update(lambda chips: {**chips, "5:0": ChipHistory({}, {}, {HBM_ECC: Held(0.0)})})
    _full_disk(monkeypatch)
    clear = argparse.Namespace(faults_command="clear", npu=5, chip=None, json=False)
    assert faults_cli.main(clear, argparse.Namespace(state_dir=str(tmp_path))) == faults_cli.EXIT_NOT_WRITTEN
    out, err = capsys.readouterr()
    assert "cleared" not in out
    assert err == (f"error: NPU 5 not cleared: cannot write {path}: No space left on device; the agent keeps the "
                   "ManuallySeparateNPU until a clear is written\n")
    monkeypatch.undo()
    assert set(FaultHistory(path).read()["5:0"].held) == {HBM_ECC}


def test_the_state_file_is_fsynced_before_it_is_renamed_and_its_directory_after(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[str] = []
    fsync, replace = os.fsync, os.replace

    def recorded_fsync(fd: int) -> None:
        calls.append("fsync dir" if stat.S_ISDIR(os.fstat(fd).st_mode) else "fsync file")
        fsync(fd)

    def recorded_replace(source: str, target: Path) -> None:
        calls.append("rename")
        replace(source, target)

    monkeypatch.setattr(os, "fsync", recorded_fsync)
    monkeypatch.setattr(os, "replace", recorded_replace)
    FaultHistory(tmp_path / "fault_history.json").update(
        lambda chips: {**chips, "3:0": ChipHistory({}, {}, {TWICE_A_DAY: Held(0.0)})})
    assert calls == ["fsync file", "rename", "fsync dir"]
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".fault_history.")] == []


@pytest.mark.parametrize(("health", "codes", "expected", "decides"), [
    ("Alarm", "8C084E00 DEADBEEF", {"8C084E00": "FreeRestartNPU", "DEADBEEF": "SeparateNPU"}, "FreeRestartNPU"),
    ("Alarm", "80E18402 8C084E00", {"80E18402": "SeparateNPU", "8C084E00": "FreeRestartNPU"}, "SeparateNPU"),
    ("Warning", "DEADBEEF", {"DEADBEEF": "SubHealthFault"}, "SubHealthFault"),
])
def test_each_code_carries_its_level_and_a_listed_code_decides_the_chip(health: str, codes: str,
                                                                        expected: dict[str, str], decides: str) -> None:
    record = npu_smi_health.parse(f"Health Status : {health}\nError Code : {codes}\n")
    samples = npu_smi_health.samples([record], CHIP, CollectContext())
    labels = {dict(s.labels)["code"]: dict(s.labels)["handling"]
              for s in samples if s.metric == "npu_error_code_active"}
    assert labels == expected
    chip = [dict(s.labels)["handling"] for s in samples if s.metric == "npu_fault_handling"]
    assert chip == [decides]


def test_a_healthy_chip_has_no_handling_series_unless_one_is_held() -> None:
    record = npu_smi_health.parse("Health Status : OK\nError Code : NA\n")
    assert npu_smi_health.samples([record], CHIP, CollectContext()) == []
    held = FaultLevels(default_table(), FaultHistory(None), lambda: 0.0)
    held.history.update(lambda chips: {"3:0": ChipHistory({}, {}, {TWICE_A_DAY: Held(0.0)})})
    samples = npu_smi_health.samples([record], CHIP, CollectContext(fault_levels=held))
    assert [(s.metric, dict(s.labels)["handling"]) for s in samples] == [("npu_fault_handling",
                                                                            "ManuallySeparateNPU")]


@pytest.mark.parametrize(("health", "expected"), [("Alarm", "SeparateNPU"), ("Warning", "SubHealthFault")])
def test_the_agent_judges_with_its_history_the_chip_the_health_and_the_codes_it_read(health: str,
                                                                                     expected: str) -> None:
    # An unknown code takes its level from the chip's health, so a health lost on the way changes the level.
    record = npu_smi_health.parse(f"Health Status : {health}\nError Code : DEADBEEF\n")
    levels = FaultLevels(default_table(), FaultHistory(None), lambda: 0.0)
    samples = npu_smi_health.samples([record], CHIP, CollectContext(fault_levels=levels))
    assert [(s.metric, dict(s.labels)["handling"]) for s in samples] == [("npu_error_code_active", expected),
                                                                          ("npu_fault_handling", expected)]
    assert set(levels.history.read()) == {"3:0"}


def test_check_and_diagnose_read_the_held_separations_of_their_chips(tmp_path: Path) -> None:
    from agent.health.node import read_history
    from agent.health.readings import NodeReadings, Reading

    def read(path: Path | None, chips: list[ChipRef]) -> NodeReadings:
        node = NodeReadings(table=Reading(error="not read"), chips=chips)
        read_history(node, path)
        return node

    path = tmp_path / "fault_history.json"
    assert read(path, [CHIP]).held == {}
    assert read(path, [CHIP]).history_note.startswith(f"no fault history at {path}")
    FaultHistory(path).update(lambda chips: {"3:0": ChipHistory({}, {}, {TWICE_A_DAY: Held(5.0)}),
                                             "4:0": ChipHistory({LINK_DOWN: 1.0}, {}, {})})
    node = read(path, [CHIP, ChipRef(4, 0), ChipRef(5, 0)])
    assert node.held == {CHIP: {TWICE_A_DAY: 5.0}}
    assert set(node.histories) == {CHIP, ChipRef(4, 0)}
    assert node.history_note == f"with the agent's fault history ({path})"
    assert read(None, [CHIP]).held == {}
