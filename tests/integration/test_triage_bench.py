"""``bench/triage.py --quick`` runs end to end: bundles generated, triaged in worker processes, culprits right."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.support.paths import REPO

ROOT = REPO


def test_quick_bench_finds_both_planted_culprits(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, str(ROOT / "bench" / "triage.py"), "--quick", "--tmp", str(tmp_path)],
                          cwd=ROOT, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    rows = {line.split("|")[0].strip(): [cell.strip() for cell in line.split("|")]
            for line in done.stdout.splitlines() if "|" in line}
    assert rows["culprits"][1] == "node-001 NPU 3 link_down; node-002 NPU 5 process_hang"
    assert rows["culprits"][3] == "yes"
    assert rows["triage wall time"][1].endswith("workers")
    assert list(tmp_path.iterdir()) == []  # the generated bundles are deleted
