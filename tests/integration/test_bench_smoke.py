"""Smoke test of the benchmark scripts: each runs with --quick and prints its table.

The three scripts run concurrently (most of their quick time is waiting on child processes), so
the module stays well under 30 s. Only the shape and sanity of the output are asserted here; the
speed and memory targets themselves are what the scripts report, not test assertions.
"""

from __future__ import annotations

import re
import subprocess
import sys
import time

import pytest

from tests.support.paths import REPO

ROOT = REPO
SCRIPTS = ("agent", "metrics_latency", "soak")
COLUMNS = ["metric", "value", "target", "ok"]
sys.path.insert(0, str(ROOT))



@pytest.fixture(scope="module")
def outputs() -> dict[str, tuple[int, str, str]]:
    procs = {
        name: subprocess.Popen([sys.executable, str(ROOT / "bench" / f"{name}.py"), "--quick"], cwd=ROOT,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for name in SCRIPTS
    }
    results: dict[str, tuple[int, str, str]] = {}
    deadline = time.monotonic() + 180  # a loaded 2-core machine; each script alone takes seconds
    for name, proc in procs.items():
        try:
            stdout, stderr = proc.communicate(timeout=max(1.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            proc.kill()
            stdout, stderr = proc.communicate()
            results[name] = (-1, stdout, stderr)
            continue
        results[name] = (proc.returncode, stdout, stderr)
    return results


def table_rows(stdout: str) -> dict[str, list[str]]:
    lines = [line for line in stdout.splitlines() if line.strip()]
    assert [cell.strip() for cell in lines[0].split("|")] == COLUMNS
    assert re.fullmatch(r"[-|]+", lines[1]), lines[1]
    rows: dict[str, list[str]] = {}
    for line in lines[2:]:
        if line.startswith("note: "):
            continue
        cells = [cell.strip() for cell in line.split("|")]
        assert len(cells) == 4, line
        assert cells[3] in {"yes", "NO", "-"}, line
        rows[cells[0]] = cells
    return rows


def number(cell: str) -> float:
    match = re.match(r"-?\d+(\.\d+)?", cell)
    assert match, cell
    return float(match.group())


def judged_right(cells: list[str]) -> bool:
    """The ok column agrees with the value and the target (``< 5 ms``, ``<= 1500``, ``~22.1``: within 10 %)."""
    approx = re.match(r"~(\d+(?:\.\d+)?)", cells[2])
    if approx:
        expected = float(approx.group(1))
        return cells[3] == ("yes" if abs(number(cells[1]) - expected) <= 0.1 * expected else "NO")
    match = re.fullmatch(r"(<=|<|>=|>) ?(-?\d+(?:\.\d+)?)(?: ?\S+)?", cells[2])
    if match is None:
        return cells[3] == "-"
    value, limit = number(cells[1]), float(match.group(2))
    met = {"<": value < limit, "<=": value <= limit, ">": value > limit, ">=": value >= limit}[match.group(1)]
    return cells[3] == ("yes" if met else "NO")


def test_every_ok_column_is_the_comparison_of_value_and_target(outputs: dict[str, tuple[int, str, str]]) -> None:
    for name, (code, stdout, _) in outputs.items():
        assert code == 0, name
        for cells in table_rows(stdout).values():
            assert judged_right(cells), (name, cells)
