"""alerts/*.rules.yml load unchanged in both rule engines npuwatch supports: Prometheus 2.42+ (promtool) and
vmalert 1.79+ (Debian 12's ``victoria-metrics`` package), which refuses what it does not know
(``keep_firing_for`` before 1.92) and checks every expression and template when it loads a file.

The meaning is the same in both: the expressions use only what both evaluate alike, and the
scrape-gap hold is written in the expression (alerts/README.md, "Scrape gaps and restarts"). The
sharded and VictoriaMetrics layouts' end-to-end tests (tests/e2e/test_fleet_layouts.py) run them.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from tests.support.rule_files import RULE_FILES

TIMEOUT_S = 120


def _tool(name: str) -> str:
    found = shutil.which(name)
    if found is None:
        pytest.fail(f"{name} not found on PATH: install it (Debian/Ubuntu: apt-get install "
                    f"{'prometheus' if name == 'promtool' else 'victoria-metrics'})")
    return found


def vmalert_dry_run(files: list[Path]) -> subprocess.CompletedProcess[str]:
    """``vmalert -dryRun``: parse the files, check every expression and template, evaluate nothing."""
    return subprocess.run(
        [_tool("vmalert"), "-dryRun", "-rule.validateExpressions", "-rule.validateTemplates",
         *[f"-rule={path}" for path in files]],
        capture_output=True, text=True, timeout=TIMEOUT_S, check=False)


def test_promtool_accepts_every_rule_file() -> None:
    checked = subprocess.run([_tool("promtool"), "check", "rules", *map(str, RULE_FILES)],
                             capture_output=True, text=True, timeout=TIMEOUT_S, check=False)
    assert checked.returncode == 0, checked.stdout + checked.stderr


def test_vmalert_accepts_every_rule_file() -> None:
    result = vmalert_dry_run(RULE_FILES)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert "invalid" not in result.stderr.lower(), result.stderr[-3000:]


def test_vmalert_dry_run_refuses_what_it_does_not_know(tmp_path: Path) -> None:
    """The check above bites: a shipped file with a keep_firing_for, the field 1.79 lacks, is refused."""
    source = next(path for path in RULE_FILES if path.name == "npu.rules.yml")
    text = source.read_text(encoding="utf-8")
    anchor = "        for: 30m\n"
    assert anchor in text
    broken = tmp_path / source.name
    broken.write_text(text.replace(anchor, anchor + "        keep_firing_for: 10m\n", 1), encoding="utf-8")
    result = vmalert_dry_run([broken])
    version = subprocess.run([_tool("vmalert"), "-version"], capture_output=True, text=True, timeout=TIMEOUT_S)
    if "v1.9" in version.stdout + version.stderr or "v1.1" in version.stdout + version.stderr:
        pytest.skip("this vmalert knows keep_firing_for (1.92+): nothing to refuse")
    assert result.returncode != 0
    assert "keep_firing_for" in result.stdout + result.stderr
