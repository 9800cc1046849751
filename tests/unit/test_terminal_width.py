"""Output width: folding to the terminal on word boundaries, and one-line verdicts that keep the word to act on."""

from __future__ import annotations

import io

import pytest

from agent.check.render import render_text, verdict_line
from agent.check.report import MESSAGE_LIMIT, LevelReport
from agent.core.terminal import one_line, terminal_width, wrap
from agent.health.results import CheckResult, Result
from agent.health.status import FAIL, PASS
from collectors.fault_levels import LEVELS

ALARM = ("NPU 5: npu-smi info -t health -i 5 -c 0 says Alarm 80E18005: 80E18005 is SeparateNPU "
         "(the chip is to be isolated)")


def _report(*checks: CheckResult) -> LevelReport:
    return LevelReport("quick", list(checks), started_at=0.0, duration_s=1.0, budget_s=10.0, node="n", chips=8)


def test_a_verdict_too_long_keeps_its_handling_level() -> None:
    text = f"FAIL chip_health (+2 more): {ALARM}"
    short = one_line(text, MESSAGE_LIMIT, keep=LEVELS)
    assert len(short) <= MESSAGE_LIMIT
    assert short.startswith("FAIL chip_health (+2 more): NPU 5: ...")
    assert "SeparateNPU" in short and "..." in short
    assert "Alar..." not in short


def test_a_verdict_without_a_level_is_cut_at_a_word() -> None:
    text = "WARN roce_flaps: NPU 3 flapped 4 times in 15 min, more than the threshold of three flaps per window"
    short = one_line(text, MESSAGE_LIMIT, keep=LEVELS)
    assert len(short) <= MESSAGE_LIMIT and short.endswith("...")
    assert text.startswith(short[:-3]) and text[len(short) - 3] == " "  # cut at a space, not in a word
    assert one_line("OK: 14 quick checks pass", MESSAGE_LIMIT, keep=LEVELS) == "OK: 14 quick checks pass"


def test_manually_separate_is_not_taken_for_separate() -> None:
    text = "FAIL chip_health: " + "x " * 40 + "80E01801 is ManuallySeparateNPU since yesterday, clear after repair"
    short = one_line(text, MESSAGE_LIMIT, keep=LEVELS)
    assert "ManuallySeparateNPU" in short and len(short) <= MESSAGE_LIMIT


@pytest.mark.parametrize("width", [60, 80, 100])
def test_wrap_folds_on_words_to_the_width(width: int) -> None:
    text = ALARM + " " + ALARM
    lines = wrap(text, width, indent=27, first_indent=27)
    assert all(len(line) <= width for line in lines)
    assert " ".join(line.strip() for line in lines) == text  # no word split, none lost
    assert wrap(text, None) == [text]


def test_a_pipe_has_no_width() -> None:
    assert terminal_width(io.StringIO()) is None


def test_check_lines_fold_under_the_evidence_column_and_the_verdict_keeps_its_level() -> None:
    report = _report(CheckResult("tools", PASS, "every tool call answered"),
                     CheckResult("chip_health", FAIL, ALARM,
                                 (Result(FAIL, ALARM, npu=5, kind="chip_fault_isolate"),),
                                 hint="isolate the chip: " + "and so on " * 12),
                     CheckResult("roce_link", FAIL, "NPU 3: hccn_tool -i 3 -link -g says DOWN"))
    assert "SeparateNPU" in verdict_line(report) and len(verdict_line(report)) <= MESSAGE_LIMIT
    text = render_text(report, width=80)
    lines = text.splitlines()
    assert lines[0] == verdict_line(report)
    assert all(len(line) <= 80 for line in lines), [line for line in lines if len(line) > 80]
    column = lines[2].index("EVIDENCE")
    chip = next(i for i, line in enumerate(lines) if line.startswith("chip_health"))
    assert lines[chip + 1].startswith(" " * column) and not lines[chip + 1][column].isspace()
    whole = render_text(report, width=None).splitlines()
    assert any(line.endswith(ALARM) for line in whole)  # to a pipe: the line whole, nothing clipped


def test_check_colours_the_verdict_and_each_status_and_nothing_else_changes() -> None:
    import re

    from agent.core.terminal import Style

    report = _report(CheckResult("tools", PASS, "every tool call answered"),
                     CheckResult("roce_link", FAIL, "NPU 3: hccn_tool -i 3 -link -g says DOWN"))
    plain = render_text(report, width=80)
    coloured = render_text(report, width=80, paint=Style(True))
    assert re.sub(r"\x1b\[[0-9;]*m", "", coloured) == plain
    lines = coloured.splitlines()
    assert lines[0].startswith("\x1b[1;31mFAIL\x1b[0m roce_link:")
    assert "\x1b[32mPASS\x1b[0m" in lines[3] and "\x1b[1;31mFAIL\x1b[0m" in lines[4]
    assert render_text(report, width=80, paint=Style(False)) == plain
