"""``npuwatch diagnose`` as a person reads it: golden text of demo-node scenarios, plain and coloured.

The goldens are written by ``python -m tests.support.diagnose_golden`` only; a test run compares.
"""

from __future__ import annotations

from tests.support import diagnose_golden
from tests.support.paths import REPO


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
