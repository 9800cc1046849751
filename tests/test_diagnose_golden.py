"""``npuwatch diagnose`` as a person reads it: golden text of demo-node scenarios, plain and coloured.

The goldens are written by ``python -m tests.diagnose_golden`` only; a test run compares.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests import diagnose_golden

REPO = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize(("name", "code"), [("healthy", 0), ("node_faults", 2), ("remote_peer", 1),
                                            ("cannot_check", 3)])
def test_golden_text(name: str, code: int, tmp_path: Path) -> None:
    report = diagnose_golden.report(name, tmp_path)
    assert report.exit_code == code
    for suffix, text in diagnose_golden.texts(report).items():
        assert text == (diagnose_golden.GOLDEN / f"{name}{suffix}").read_text(), suffix


def test_every_scenario_has_its_goldens() -> None:
    names = {path.name for path in diagnose_golden.GOLDEN.iterdir()}
    assert names == {f"{name}{suffix}" for name in diagnose_golden.CASES for suffix in (".txt", ".color.txt")}


def test_colour_goldens_differ_from_plain_only_by_escapes() -> None:
    import re

    for name in diagnose_golden.CASES:
        plain = (diagnose_golden.GOLDEN / f"{name}.txt").read_text()
        color = (diagnose_golden.GOLDEN / f"{name}.color.txt").read_text()
        assert "\x1b[" in color and "\x1b" not in plain
        assert re.sub(r"\x1b\[[0-9;]*m", "", color) == plain


def test_the_manual_shows_the_plain_output() -> None:
    manual = (REPO / "docs" / "hccl-timeouts.md").read_text(encoding="utf-8")
    example = (diagnose_golden.GOLDEN / "node_faults.txt").read_text()
    assert f"```text\n$ npuwatch diagnose\n{example}```" in manual
