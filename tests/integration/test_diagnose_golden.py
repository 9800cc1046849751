"""``npuwatch diagnose`` as a person reads it: golden text of demo-node scenarios, plain and coloured.

The goldens are written by ``python -m tests.support.diagnose_golden`` only; a test run compares.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support import diagnose_golden


@pytest.mark.parametrize(("name", "code"), [("healthy", 0), ("node_faults", 2), ("remote_peer", 1),
                                            ("cannot_check", 3)])
def test_golden_text(name: str, code: int, tmp_path: Path) -> None:
    report = diagnose_golden.report(name, tmp_path)
    assert report.exit_code == code
    for suffix, text in diagnose_golden.texts(report).items():
        assert text == (diagnose_golden.GOLDEN / f"{name}{suffix}").read_text(), suffix
