"""The device plugin's fault-handling semantics on its own two files (issue 31 section 2): how codes and rules
are read, which rule is skipped, and how levels move over time."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from agent.handling.escalation import ChipHistory, Raised, step
from collectors.fault_levels import (
    FaultTable,
    FrequencyRule,
    configured_table,
    default_table,
    judge_static,
    normalise,
    parse_code_lists,
    parse_escalation,
    static_level,
)

LINK_DOWN = "81078603"
HBM = "80E01801"
AIC_BUS = "80C98009"
MINUTE = 60.0


def chips(table: FaultTable, seen: list[tuple[float, list[str]]], health: str = "Warning") -> list[str | None]:
    history, out = ChipHistory(), []
    for now, codes in seen:
        history, levels = step(table, history, health, codes, now)
        out.append(levels.chip)
    return out


def blips(count: int, polls: int) -> list[tuple[float, list[str]]]:
    """``count`` appearances of the link-down code an hour apart, each seen by ``polls`` polls a minute apart."""
    return [(minute * MINUTE, [LINK_DOWN] if minute % 60 < polls else []) for minute in range(count * 60)]


def test_short_link_blips_never_count_towards_the_repeat_rule() -> None:
    # five appearances in 24 h, each gone by the next poll: the vendor counts none (they never lasted 20 s)
    assert set(chips(default_table(), blips(5, 1))) <= {"NotHandleFault", None}


def test_link_downs_that_last_past_the_duration_rule_count_and_separate_the_chip() -> None:
    result = chips(default_table(), blips(5, 2))
    assert "ManuallySeparateNPU" not in result[:4 * 60]
    assert result[4 * 60 + 1] == "ManuallySeparateNPU"
    assert result[-1] == "ManuallySeparateNPU"  # held for 48 h after the last recovery


def test_codes_are_compared_by_value() -> None:
    table = default_table()
    assert normalise("020001002") == normalise("20001002") == normalise("0x20001002") == "20001002"
    assert static_level(table, "20001002", "Warning") == "SeparateNPU"  # listed as 020001002
    assert normalise("200001002") != normalise("20001002")  # a different value
    levels, _, _ = parse_code_lists({"SeparateNPUCodes": ["0x00ab"], "NotHandleFaultCodes": ["AB"]})
    assert levels == {"AB": "SeparateNPU"}
    levels, _, skipped = parse_code_lists({"SeparateNPUCodes": ["zz", "\uff18", "0x", "12345678901234567", "CD"]})
    assert levels == {"CD": "SeparateNPU"} and len(skipped) == 4  # only ASCII hex of at most 16 digits is a code


def test_rule_codes_are_compared_by_value_too() -> None:
    frequency, _, _ = parse_escalation({"FaultFrequency": [
        {"EventId": ["080E01801"], "TimeWindow": 86400, "Times": 2, "FaultHandling": "ManuallySeparateNPU"}]})
    table = FaultTable({}, frequency)
    assert chips(table, [(0, [HBM]), (60, []), (120, ["0x80e01801"])])[-1] == "ManuallySeparateNPU"


def test_null_lists_are_empty_lists(tmp_path: Path) -> None:
    codes = tmp_path / "faultCode.json"
    codes.write_text(json.dumps({"SeparateNPUCodes": ["AB"], "RestartNPUCodes": None,
                                 "PreSeparateNPUNetworkCodes": None}), encoding="utf-8")
    escalation = tmp_path / "faultCustomization.json"
    escalation.write_text(json.dumps({"FaultFrequency": None, "FaultDuration": None}), encoding="utf-8")
    table, problem = configured_table(codes, escalation)
    assert problem is None
    assert dict(table.levels) == {"AB": "SeparateNPU"}
    assert (table.frequency, table.duration, table.skipped) == ((), (), ())


def _rule(**fields: Any) -> dict[str, Any]:
    return {"EventId": ["AB"], "TimeWindow": 3600, "Times": 2, "FaultHandling": "ManuallySeparateNPU", **fields}


def test_one_bad_rule_is_skipped_and_the_others_and_the_codes_file_are_kept(tmp_path: Path) -> None:
    codes = tmp_path / "faultCode.json"
    codes.write_text(json.dumps({"SeparateNPUCodes": ["CD"]}), encoding="utf-8")
    escalation = tmp_path / "faultCustomization.json"
    escalation.write_text(json.dumps({"FaultFrequency": [_rule(TimeWindow=5), _rule(EventId=["EF"])],
                                      "FaultDuration": [{"EventId": ["CD"], "FaultTimeout": 30,
                                                         "FaultHandling": "SeparateNPU"}]}), encoding="utf-8")
    table, problem = configured_table(codes, escalation)
    assert problem is None
    assert dict(table.levels) == {"CD": "SeparateNPU"}  # not the packaged codes
    assert [rule.codes for rule in table.frequency] == [frozenset({"EF"})]
    assert len(table.duration) == 1
    assert [(entry.file, entry.entry) for entry in table.skipped] == [(str(escalation), "FaultFrequency[0]")]
    assert "TimeWindow" in table.skipped[0].why
    assert table.skipped_in(str(escalation)) == 1
    assert table.skipped_in(str(codes)) == 0


def test_an_unreadable_file_falls_back_alone(tmp_path: Path) -> None:
    codes = tmp_path / "faultCode.json"
    codes.write_text(json.dumps({"SeparateNPUCodes": ["CD"]}), encoding="utf-8")
    escalation = tmp_path / "faultCustomization.json"
    escalation.write_text("{not json", encoding="utf-8")
    table, problem = configured_table(codes, escalation)
    assert problem is not None and str(escalation) in problem and "fault codes" not in problem
    assert dict(table.levels) == {"CD": "SeparateNPU"}
    assert table.frequency == default_table().frequency


@pytest.mark.parametrize(("rule", "kept"), [
    (_rule(TimeWindow=59), False),
    (_rule(TimeWindow=60), True),
    (_rule(TimeWindow=864000), True),
    (_rule(TimeWindow=864001), False),
    (_rule(Times=0), False),
    (_rule(Times=101), False),
    (_rule(FaultHandling="RestartNPU"), False),  # a level other than ManuallySeparateNPU needs a release window
    (_rule(FaultHandling="RestartNPU", ReleaseTimeWindow=600), True),
    (_rule(FaultHandling="RestartNPU", ReleaseTimeWindow=None), False),
    (_rule(FaultHandling="ManuallySeparateNPU"), True),
    (_rule(FaultHandling="Reboot"), False),
    (_rule(EventId=[]), False),
    (_rule(EventId=None), False),
    (_rule(TimeWindow="3600"), False),
])
def test_frequency_rules_are_validated_as_the_device_plugin_does(rule: dict[str, Any], kept: bool) -> None:
    frequency, _, skipped = parse_escalation({"FaultFrequency": [rule]})
    assert (len(frequency), len(skipped)) == ((1, 0) if kept else (0, 1))


def _duration(**fields: Any) -> dict[str, Any]:
    return {"EventId": ["AB"], "FaultTimeout": 20, "RecoverTimeout": 60, "FaultHandling": "PreSeparateNPU", **fields}


@pytest.mark.parametrize(("rule", "kept"), [
    (_duration(), True),
    (_duration(FaultTimeout=0), True),
    (_duration(FaultTimeout=-1), False),
    (_duration(FaultTimeout=601), False),
    (_duration(RecoverTimeout=0), True),
    (_duration(RecoverTimeout=-1), False),
    (_duration(FaultHandling="ManuallySeparateNPU"), False),  # not a duration level
    (_duration(FaultHandling="SeparateNPU"), True),
])
def test_duration_rules_are_validated_as_the_device_plugin_does(rule: dict[str, Any], kept: bool) -> None:
    _, duration, skipped = parse_escalation({"FaultDuration": [rule]})
    assert (len(duration), len(skipped)) == ((1, 0) if kept else (0, 1))


def test_a_fault_timeout_of_zero_applies_from_the_first_poll() -> None:
    _, duration, _ = parse_escalation({"FaultDuration": [_duration(FaultTimeout=0, RecoverTimeout=0)]})
    assert chips(FaultTable({}, (), duration), [(0, ["AB"]), (60, []), (61, [])]) == [
        "PreSeparateNPU", "PreSeparateNPU", None]


def test_a_code_in_two_rules_of_one_kind_keeps_the_first() -> None:
    frequency, _, skipped = parse_escalation({"FaultFrequency": [_rule(EventId=["AB", "CD"]), _rule(EventId=["ab"])]})
    assert [rule.codes for rule in frequency] == [frozenset({"AB", "CD"})]
    assert len(skipped) == 1


def test_a_frequency_level_below_manual_stays_until_its_release_window_after_recovery() -> None:
    table = FaultTable({}, (FrequencyRule(frozenset({"AB"}), 3600.0, 2, "RestartNPU", release_s=600.0),))
    seen = [(0, ["AB"]), (60, []), (120, ["AB"]), (180, ["AB"]), (240, []), (840, []), (841, [])]
    history, out = ChipHistory(), []
    for now, codes in seen:
        history, levels = step(table, history, "Warning", codes, now)
        out.append(levels.chip)
    assert out == ["SubHealthFault", None, "RestartNPU", "RestartNPU", "RestartNPU", "RestartNPU", None]
    assert history.raised == {} and history.seen == {}


def test_a_raised_level_is_kept_across_a_restart(tmp_path: Path) -> None:
    from agent.handling.history import FaultHistory

    history = FaultHistory(tmp_path / "fault_history.json")
    history.update(lambda chips: {"3:0": ChipHistory(raised={"AB": Raised("RestartNPU", 5.0, 600.0)},
                                                     recovered={"AB": 10.0})})
    again = FaultHistory(tmp_path / "fault_history.json").read()["3:0"]
    assert again.raised == {"AB": Raised("RestartNPU", 5.0, 600.0)} and again.recovered == {"AB": 10.0}


def test_network_code_lists_are_read_and_restart_levels_never_apply_to_network_codes() -> None:
    levels, network, skipped = parse_code_lists({"SeparateNPUNetworkCodes": [LINK_DOWN],
                                                 "RestartNPUCodes": ["81078607"],
                                                 "RestartNPUNetworkCodes": ["110000002"]})
    assert network == {LINK_DOWN: "SeparateNPU", "81078607": "NotHandleFault"}
    assert [entry.entry for entry in skipped] == ["RestartNPUNetworkCodes"]
    table = FaultTable(levels, network=network)
    assert static_level(table, LINK_DOWN, "Warning") == "SeparateNPU"
    assert static_level(table, "81078607", "Alarm") == "NotHandleFault"


def test_an_unlisted_network_code_is_pre_separate() -> None:
    table = FaultTable({})
    assert static_level(table, LINK_DOWN, "Alarm") == "PreSeparateNPU"
    assert static_level(table, LINK_DOWN, "OK") == "PreSeparateNPU"
    assert judge_static(table, "OK", [LINK_DOWN]).chip == "PreSeparateNPU"


def test_a_listed_code_decides_over_an_unlisted_one() -> None:
    table = default_table()
    judged = judge_static(table, "Alarm", ["80E21007", "DEADBEEF"])
    assert judged.codes == {"80E21007": "NotHandleFault", "DEADBEEF": "SeparateNPU"}
    assert judged.chip == "NotHandleFault"
    assert judge_static(table, "Alarm", ["DEADBEEF"]).chip == "SeparateNPU"


def test_a_network_code_and_a_chip_code_are_judged_apart() -> None:
    # the chip's unlisted code is by the health word even beside a listed network code
    assert judge_static(default_table(), "Alarm", [LINK_DOWN, "DEADBEEF"]).chip == "SeparateNPU"


def test_an_ai_core_bus_error_beside_an_hbm_double_bit_error_is_the_same_fault() -> None:
    table = default_table()
    assert table.levels[AIC_BUS] == "RestartRequest" and table.levels[HBM] == "RestartBusiness"
    judged = judge_static(table, "Alarm", [HBM, AIC_BUS])
    assert judged.codes == {HBM: "RestartBusiness", AIC_BUS: "RestartBusiness"}
    history, _ = step(table, ChipHistory(), "Alarm", [HBM], 0.0)
    _, close = step(table, history, "Alarm", [HBM, AIC_BUS], 9.0)
    assert close.codes[AIC_BUS] == "RestartBusiness"
    _, apart = step(table, history, "Alarm", [HBM, AIC_BUS], 11.0)
    assert apart.codes[AIC_BUS] == "RestartRequest"


def test_faults_show_lists_raised_and_lasting_levels(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import argparse

    from agent.handling import cli as faults_cli
    from agent.handling.history import FaultHistory

    FaultHistory(tmp_path / "fault_history.json").update(lambda chips: {"3:0": ChipHistory(
        active={LINK_DOWN: 0.0}, raised={"AB": Raised("RestartNPU", 5.0, 600.0)}, lasting={LINK_DOWN: 20.0})})
    config = argparse.Namespace(state_dir=str(tmp_path))
    assert faults_cli.main(argparse.Namespace(faults_command="show", json=False), config) == faults_cli.EXIT_OK
    out = capsys.readouterr().out
    assert "NPU 3 chip 0: RestartNPU for AB since" in out and "released 600 s after its last recovery" in out
    assert f"NPU 3 chip 0: {LINK_DOWN} has lasted past its duration rule since" in out
    assert faults_cli.main(argparse.Namespace(faults_command="show", json=True), config) == faults_cli.EXIT_OK
    shown = json.loads(capsys.readouterr().out)["3:0"]
    assert shown["raised"] == {"AB": {"level": "RestartNPU", "since": 5.0, "release_s": 600.0}}
    assert shown["lasting_since"] == {LINK_DOWN: 20.0}


def test_events_end_an_appearance_when_they_say_so() -> None:
    # The device plugin's own sequence (FaultTimeout 30, RecoverTimeout 60), one call per fault event: the level is
    # held, released after 61 s clear, and held again by an appearance of 31 s that has already ended.
    _, duration, _ = parse_escalation({"FaultDuration": [_duration(FaultTimeout=30, RecoverTimeout=60)]})
    table = FaultTable({}, (), duration)
    history, out = ChipHistory(), []
    for now, codes in [(0, ["AB"]), (40, ["AB"]), (50, []), (111, ["AB"]), (142, [])]:
        history, levels = step(table, history, "Warning", codes, now, exact=True)
        out.append(levels.chip)
    assert out == ["SubHealthFault", "PreSeparateNPU", "PreSeparateNPU", "SubHealthFault", "PreSeparateNPU"]
    # polled, the same 31 s appearance might have been a one-poll blip: it does not count
    history, out = ChipHistory(), []
    for now, codes in [(111, ["AB"]), (142, [])]:
        history, levels = step(table, history, "Warning", codes, now)
        out.append(levels.chip)
    assert out == ["SubHealthFault", None]


def test_a_held_level_is_not_released_while_its_code_is_still_lasting() -> None:
    from agent.handling.escalation import Held

    # link down held at 200000 (48 h release); an older recovery at 100; the port went up at 200010, and its
    # duration level holds until it has been up for 60 s: the release window has not even started
    history = ChipHistory(held={LINK_DOWN: Held(200000.0, 172800.0)}, lasting={LINK_DOWN: 199990.0},
                          cleared={LINK_DOWN: 200010.0}, recovered={LINK_DOWN: 100.0})
    after, levels = step(default_table(), history, "OK", [], 200030.0)
    assert levels.chip == "ManuallySeparateNPU" and LINK_DOWN in after.held
    after, levels = step(default_table(), after, "OK", [], 200071.0)  # up for 61 s: the window starts at 200070
    assert after.recovered[LINK_DOWN] == 200070.0 and LINK_DOWN in after.held
    after, levels = step(default_table(), after, "OK", [], 200070.0 + 172801.0)
    assert levels.chip is None and after.held == {}


@pytest.mark.parametrize(("rules", "chip"), [
    ([{"EventId": [LINK_DOWN], "TimeWindow": 60, "Times": 3, "FaultHandling": "SubHealthFault",
       "ReleaseTimeWindow": 3600}], "SubHealthFault"),  # the rule's level changed: the held level follows
    ([], "NotHandleFault"),  # the rule removed: released, the code is at its listed level
    ([{"EventId": [LINK_DOWN], "TimeWindow": 60, "Times": 3, "FaultHandling": "PreSeparateNPU",
       "ReleaseTimeWindow": 3600}], "PreSeparateNPU"),  # unchanged: kept
])
def test_a_held_frequency_level_follows_its_rule_after_a_reload(rules: list[dict[str, Any]], chip: str) -> None:
    # the device plugin's upgradefault_test.go (UpdateFaultLevel, RemoveFaultStrategy, FaultLevelUnchanged with
    # FrequencyUpgradeType): link down raised to PreSeparateNPU, then the table is reloaded with another rule
    frequency, _, skipped = parse_escalation({"FaultFrequency": rules})
    assert skipped == ()
    table = FaultTable(default_table().levels, frequency, network=default_table().network)
    history = ChipHistory(active={LINK_DOWN: 100.0}, raised={LINK_DOWN: Raised("PreSeparateNPU", 100.0, 3600.0)})
    after, levels = step(table, history, "OK", [LINK_DOWN], 160.0)
    assert levels.chip == chip and levels.codes[LINK_DOWN] == chip
    assert (LINK_DOWN in after.raised) == bool(rules)


def test_a_reload_that_makes_a_held_frequency_level_manual_holds_it_until_cleared() -> None:
    frequency, _, _ = parse_escalation({"FaultFrequency": [_rule(EventId=["AB"])]})
    history = ChipHistory(raised={"AB": Raised("RestartNPU", 100.0, 600.0)}, recovered={"AB": 50.0})
    after, levels = step(FaultTable({}, frequency), history, "OK", [], 100000.0)
    assert levels.chip == "ManuallySeparateNPU" and after.raised == {} and after.held["AB"].since == 100.0


@pytest.mark.parametrize(("rules", "chip"), [
    ([_duration(EventId=[LINK_DOWN], FaultHandling="SubHealthFault")], "SubHealthFault"),
    ([], "NotHandleFault"),
    ([_duration(EventId=[LINK_DOWN])], "PreSeparateNPU"),
])
def test_a_duration_level_follows_its_rule_after_a_reload(rules: list[dict[str, Any]], chip: str) -> None:
    # the same cases with DurationUpgradeType: the level is read from the rule as it is at each judgement
    _, duration, _ = parse_escalation({"FaultDuration": rules})
    table = FaultTable(default_table().levels, (), duration, network=default_table().network)
    history = ChipHistory(active={LINK_DOWN: 70.0}, lasting={LINK_DOWN: 90.0})
    _, levels = step(table, history, "OK", [LINK_DOWN], 160.0)
    assert levels.chip == chip


def _both_rules() -> FaultTable:
    """80E0180F as the device plugin's TestGetFaultType configures it: three times in 24 h is ManuallySeparateNPU,
    and an appearance of more than 120 s is RestartBusiness; 80C98002 beside it is a listed RestartRequest."""
    frequency, duration, skipped = parse_escalation({
        "FaultFrequency": [{"EventId": ["80E0180F"], "TimeWindow": 86400, "Times": 3,
                            "FaultHandling": "ManuallySeparateNPU"}],
        "FaultDuration": [{"EventId": ["80E0180F"], "FaultTimeout": 120, "RecoverTimeout": 0,
                           "FaultHandling": "RestartBusiness"}]})
    assert skipped == ()
    return FaultTable({"80C98002": "RestartRequest"}, frequency, duration)


@pytest.mark.parametrize(("lasts_s", "chip"), [(150, "ManuallySeparateNPU"), (5, "RestartRequest")])
def test_a_code_with_a_duration_rule_counts_only_appearances_that_lasted(lasts_s: int, chip: str) -> None:
    # Documented (docs/fault-codes.md, where npuwatch differs): three appearances that each outlast the 120 s
    # FaultTimeout separate the chip, as in the device plugin; three short ones count nothing, as the device
    # plugin's own event path records them (TestGetFaultType plants three counted occurrences 10, 8 and 2 s
    # apart, which no appearance of a code with a 120 s duration rule can leave behind).
    seen = [(float(t), ["80C98002", *(["80E0180F"] if any(a <= t < a + lasts_s for a in (0, 300, 600)) else [])])
            for t in range(0, 1000, 5)]
    assert chips(_both_rules(), seen, "Alarm")[-1] == chip


def test_an_ai_core_bus_error_just_before_an_hbm_error_stays_listed_at_the_hbm_errors_level() -> None:
    # Documented (docs/fault-codes.md, where npuwatch differs): the device plugin's TestNewFaultInfosForHBMErr
    # drops a bus error raised 0.4 s before the HBM double-bit error; npuwatch keeps the code the driver lists,
    # at the HBM error's level, and the chip's level is the HBM error's alone, as there.
    table = default_table()
    history, first = step(table, ChipHistory(), "Alarm", [AIC_BUS], 3.0)
    assert first.chip == "RestartRequest"  # before the HBM error: the bus error on its own
    history, levels = step(table, history, "Alarm", [AIC_BUS, HBM], 3.4)
    assert levels.codes == {AIC_BUS: "RestartBusiness", HBM: "RestartBusiness"}
    assert levels.chip == "RestartBusiness" == judge_static(table, "Alarm", [HBM]).chip
    assert history.faults == ()  # neither is a fault that resets or separates the chip
