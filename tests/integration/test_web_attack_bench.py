"""Smoke test of bench/attack.py: it runs every attack with --quick, stops by itself and prints its
table. Only the shape is asserted; the numbers are what the script reports (see docs/security.md and
docs/benchmarks.md)."""

from __future__ import annotations

import subprocess
import sys

from tests.support.paths import REPO

ROOT = REPO


def test_attack_bench_quick_prints_its_table() -> None:
    done = subprocess.run([sys.executable, str(ROOT / "bench" / "attack.py"), "--quick"], cwd=ROOT,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    lines = [line for line in done.stdout.splitlines() if line.strip()]
    assert [cell.strip() for cell in lines[0].split("|")] == ["attack", "legit answered", "p50", "p99",
                                                               "agent RSS max"]
    rows = [line for line in lines[2:] if not line.startswith("note: ")]
    names = [row.split("|")[0].strip() for row in rows]
    for attack in ("slowloris", "idle connections", "wrong-password flood", "TLS handshake flood",
                   "garbage tool output", "oversize tool output", "symlink-loop log tree"):
        assert any(name.startswith(attack) for name in names), names
    for row in rows:
        answered = row.split("|")[1].strip()
        assert answered.endswith(")") and "%" in answered, row
