"""Reading the tables the bench/ scripts print (metric | value | target | ok), for the tests that check them."""

from __future__ import annotations

import re

__all__ = ["COLUMNS", "judged_right", "number", "row", "table_rows"]

COLUMNS = ["metric", "value", "target", "ok"]


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

def row(rows: dict[str, list[str]], prefix: str) -> list[str]:
    matches = [cells for name, cells in rows.items() if name.startswith(prefix)]
    assert matches, f"no row starting with {prefix!r} in {sorted(rows)}"
    return matches[0]
