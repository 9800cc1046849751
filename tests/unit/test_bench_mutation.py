"""bench/mutation.py's own logic: naming, diffing, verdict matching, scores (mutmut itself is not run)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from tests.support.paths import REPO

ROOT = REPO
sys.path.insert(0, str(ROOT / "bench"))
import mutation  # noqa: E402

sys.path.remove(str(ROOT / "bench"))


def test_every_target_and_its_tests_exist() -> None:
    for target in mutation.TARGETS:
        assert (ROOT / target.path).is_file(), target.path
        for test in target.tests:
            assert (ROOT / test).is_file(), test


def test_unknown_module_is_refused() -> None:
    with pytest.raises(SystemExit, match="no module 'nope'"):
        mutation.find_targets(["nope"])
    assert [t.path for t in mutation.find_targets(["collectors.hccn_link*"])][:2] == [
        "collectors/hccn_link.py", "collectors/hccn_link_stat.py"]


def test_function_of_mutant_names() -> None:
    assert mutation.function_of("collectors.bounds.x_clip__mutmut_3", "collectors.bounds") == "clip"
    assert mutation.function_of("collectors.bounds.x\u01c1Rejects\u01c1value__mutmut_12",
                                "collectors.bounds") == "Rejects.value"
    assert mutation.function_of("a.b.x__private__mutmut_1", "a.b") == "_private"


def test_changed_line_finds_the_first_difference() -> None:
    before = ["def f(x):", "    y = x + 1", "    return y"]
    after = ["def f(x):", "    y = x - 1", "    return y"]
    assert mutation.changed_line(before, after) == (1, "y = x + 1", "y = x - 1")
    assert mutation.changed_line(before, before) == (0, "", "")


def test_verdicts_match_on_function_and_line_text() -> None:
    verdict = mutation.Verdict("m", "f", "a < b", "a <= b", mutation.EQUIVALENT, "why")
    same = mutation.Mutant("m.x_f__mutmut_1", "f", mutation.SURVIVED, 3, "a < b", "a <= b")
    moved = mutation.Mutant("m.x_f__mutmut_9", "f", mutation.SURVIVED, 30, "a < b", "a <= b")
    other = mutation.Mutant("m.x_f__mutmut_2", "f", mutation.SURVIVED, 3, "a < b", "a > b")
    assert mutation.find_verdict(same, "m", [verdict]) is verdict
    assert mutation.find_verdict(moved, "m", [verdict]) is verdict
    assert mutation.find_verdict(other, "m", [verdict]) is None
    assert mutation.find_verdict(same, "n", [verdict]) is None


def test_score_leaves_out_equivalent_mutants_and_counts_timeouts() -> None:
    target = mutation.Target("m.py", ())
    equivalent = mutation.Verdict("m", "f", "", "", mutation.EQUIVALENT, "")
    accepted = mutation.Verdict("m", "f", "", "", mutation.ACCEPTED, "")
    result = mutation.ModuleResult(target, [
        mutation.Mutant("1", "f", mutation.KILLED),
        mutation.Mutant("2", "f", mutation.KILLED),
        mutation.Mutant("3", "f", mutation.TIMEOUT),
        mutation.Mutant("4", "f", mutation.SURVIVED, verdict=equivalent),
        mutation.Mutant("5", "f", mutation.SURVIVED, verdict=accepted),
        mutation.Mutant("6", "f", mutation.SURVIVED),
    ])
    assert result.score == pytest.approx(60.0)
    assert [m.name for m in result.unexplained()] == ["6"]
    row = mutation.table_row(result)
    assert row[:8] == ["m.py", "6", "2", "3", "1", "1", "1", "60.0"]
    assert mutation.ModuleResult(target).score is None


def test_mutmut_section_is_toml_for_one_module() -> None:
    target = mutation.Target("collectors/bounds.py", ("tests/unit/test_bounds.py",))
    section = mutation.mutmut_section(target)
    assert '\n[tool.mutmut]\n' in section
    assert 'only_mutate = ["collectors/bounds.py"]' in section
    assert 'pytest_add_cli_args_test_selection = ["tests/unit/test_bounds.py"]' in section


def test_describe_locates_a_mutant_in_the_source(tmp_path: Path) -> None:
    source = tmp_path / "m.py"
    source.write_text("import os\n\n\ndef f(x):\n    y = x + 1\n    return y\n")
    mutated = tmp_path / "m_mutated.py"
    mutated.write_text("def x_f__mutmut_orig(x):\n    y = x + 1\n    return y\n\n"
                       "def x_f__mutmut_1(x):\n    y = x - 1\n    return y\n")
    mutant = mutation.Mutant("m.x_f__mutmut_1", "f", mutation.SURVIVED)
    mutation.describe([mutant], source, mutated)
    assert (mutant.line, mutant.before, mutant.after) == (5, "y = x + 1", "y = x - 1")


def test_case_only_verdicts_cover_regex_literals_only() -> None:
    verdict = mutation.Verdict("m", "*", mutation.CASE_ONLY, "", mutation.EQUIVALENT, "ignorecase")
    regex = mutation.Mutant("m.x_f__mutmut_1", "f", mutation.SURVIVED, 1, 'k = r"Aicore\\s*Count"',
                            'k = r"aicore\\s*count"')
    message = mutation.Mutant("m.x_f__mutmut_2", "f", mutation.SURVIVED, 1, 'raise E("no header")',
                              'raise E("NO HEADER")')
    other = mutation.Mutant("m.x_f__mutmut_3", "f", mutation.SURVIVED, 1, 'k = r"A"', 'k = r"XXAXX"')
    assert mutation.find_verdict(regex, "m", [verdict]) is verdict
    assert mutation.find_verdict(message, "m", [verdict]) is None
    assert mutation.find_verdict(other, "m", [verdict]) is None


def test_failure_summary_names_the_tests_that_stopped_the_stats_run(tmp_path: Path) -> None:
    log = tmp_path / "mutmut.log"
    log.write_text("\r⠋ Running stats\r⠙ Running stats\n.F.\n"
                   "FAILED tests/integration/test_tool_runner.py::test_x - AssertionError: 4 < 3\n"
                   "1 failed, 2 passed in 3.0s\nfailed to collect stats. runner returned 1\n")
    assert mutation.failure_summary(log) == ("failed to collect stats. runner returned 1; FAILED "
                                             "tests/integration/test_tool_runner.py::test_x - AssertionError: 4 < 3")
    assert mutation.failure_summary(tmp_path / "missing.log") == ""
