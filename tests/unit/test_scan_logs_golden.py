"""``npuwatch scan-logs`` as a person reads it: golden text of a few log directories, plain and coloured.

The goldens are written by ``python -m tests.support.scan_logs_golden`` only; a test run compares.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support import scan_logs_golden
from tests.support.paths import REPO


@pytest.fixture
def utc(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setenv("TZ", "UTC")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


@pytest.mark.parametrize(("name", "code"), [("errors", 1), ("clean", 0), ("nothing_read", 3)])
@pytest.mark.parametrize("suffix", [".txt", ".color.txt"])
def test_golden_text(name: str, code: int, suffix: str, tmp_path: Path, utc: None) -> None:
    got, text, err = scan_logs_golden.run(name, tmp_path, color=suffix == ".color.txt")
    assert got == code
    assert err == ""
    assert text == (scan_logs_golden.GOLDEN / f"{name}{suffix}").read_text()


def test_colour_goldens_differ_from_plain_only_by_escapes() -> None:
    for name in scan_logs_golden.CASES:
        plain = (scan_logs_golden.GOLDEN / f"{name}.txt").read_text()
        color = (scan_logs_golden.GOLDEN / f"{name}.color.txt").read_text()
        assert "\x1b[" in color and "\x1b" not in plain
        assert re.sub(r"\x1b\[[0-9;]*m", "", color) == plain


def test_the_manual_shows_the_plain_output() -> None:
    manual = (REPO / "docs" / "hccl-timeouts.md").read_text(encoding="utf-8")
    example = (scan_logs_golden.GOLDEN / "errors.txt").read_text()
    assert f"```text\n$ npuwatch scan-logs logs\n{example}```" in manual
