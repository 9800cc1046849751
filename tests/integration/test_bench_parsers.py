"""Smoke test of ``bench/parsers.py``: it runs with --quick and prints its table (timings are not asserted)."""

from __future__ import annotations

import subprocess
import sys

from tests.support.paths import REPO

ROOT = REPO
sys.path.insert(0, str(ROOT))

from bench.parsers import CASES, COLUMNS  # noqa: E402


def test_quick_run_prints_one_row_per_parser_and_size() -> None:
    result = subprocess.run([sys.executable, str(ROOT / "bench" / "parsers.py"), "--quick"], cwd=ROOT,
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert tuple(cell.strip() for cell in lines[0].split("|")) == COLUMNS
    rows = [[cell.strip() for cell in line.split("|")] for line in lines[2:] if not line.startswith("note: ")]
    assert [(row[0], row[1]) for row in rows] == [(name, count) for name in CASES for count in ("100", "200")]
    for row in rows:
        assert int(row[2]) > 0 and float(row[3]) >= 0 and float(row[4]) >= 0
        assert row[5] == "-" or (row[1] == "200" and row[5].endswith("x"))


def test_bad_row_counts_are_refused() -> None:
    result = subprocess.run([sys.executable, str(ROOT / "bench" / "parsers.py"), "--rows", "0,100"], cwd=ROOT,
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 2
    assert "--rows needs positive counts" in result.stderr
