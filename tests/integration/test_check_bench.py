"""Smoke test of bench/check.py: it runs the quick rows and prints its table (timings are the
benchmark's business, not asserted here: the test machine is shared)."""

from __future__ import annotations

import subprocess
import sys

from tests.support.paths import REPO

ROOT = REPO


def test_the_check_benchmark_prints_a_row_per_case() -> None:
    result = subprocess.run([sys.executable, str(ROOT / "bench" / "check.py"), "--quick"], cwd=ROOT,
                            capture_output=True, text=True, timeout=600, check=False)
    assert result.returncode in (0, 1), result.stderr[-2000:]  # 1: a row over its budget
    lines = [line for line in result.stdout.splitlines() if line.strip()]
    assert [cell.strip() for cell in lines[0].split("|")] == ["level", "checks", "seconds", "budget", "ok"]
    rows = {line.split("|")[0].strip(): [cell.strip() for cell in line.split("|")] for line in lines[2:]
            if not line.startswith("note: ")}
    assert set(rows) == {"quick, 8 chips", "quick, 16 chips", "quick, 8 chips, hccn_tool hangs",
                         "quick, 8 chips, npu-smi hangs"}
    for cells in rows.values():
        assert int(cells[1]) == 14 and cells[3] == "10 s" and cells[4] in ("yes", "NO")
    assert "(fail)" in rows["quick, 8 chips, hccn_tool hangs"][2]
