"""bench/mutation.py's own logic: naming, diffing, verdict matching, scores (mutmut itself is not run)."""

from __future__ import annotations

import subprocess
import sys

from tests.support.paths import REPO

ROOT = REPO
sys.path.insert(0, str(ROOT / "bench"))

sys.path.remove(str(ROOT / "bench"))


def test_list_prints_the_mapping() -> None:
    proc = subprocess.run([sys.executable, str(ROOT / "bench" / "mutation.py"), "--list", "--module", "bounds"],
                          capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines()[0] == "collectors/bounds.py"
    assert "    tests/unit/test_bounds.py" in proc.stdout.splitlines()
