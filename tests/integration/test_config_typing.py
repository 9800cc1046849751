"""A misspelt or mistyped config key is a mypy error: mypy (the project's settings) over code that uses the config."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from tests.support.paths import REPO

# Each line that mypy must refuse, with the error code it must give.
SNIPPET = '''\
from __future__ import annotations

from agent.core.config import Config, load_config


def interval_of(config: Config) -> float:
    return config.collectors.npu_smi.interval


config = load_config(None)
efficiency: float = config.probes.gemm.min_efficiency
first_run: float = config.check.schedule.quick.first_run
window: float | None = config.check.flap_window
paths: tuple[str, ...] = config.collectors.hccl_logs.paths
config.collectors.npu_smi.intervall  # E: attr-defined
config.probe.gemm.min_efficiency  # E: attr-defined
port: str = config.web.port  # E: assignment
stall: float = config.probes.stall  # E: assignment
config.probes.gemm.min_efficiency = 0.5  # E: misc
config.labels["team"] = "infra"  # E: index
'''


def run_mypy(tmp_path: Path, text: str) -> subprocess.CompletedProcess[str]:
    snippet = tmp_path / "uses_config.py"
    snippet.write_text(text, encoding="utf-8")
    argv = [sys.executable, "-m", "mypy", "--cache-dir", str(tmp_path / "cache"), "--show-error-codes", str(snippet)]
    return subprocess.run(argv, capture_output=True, text=True, timeout=300, cwd=REPO)


def test_mypy_refuses_each_misspelt_or_mistyped_key(tmp_path: Path) -> None:
    result = run_mypy(tmp_path, SNIPPET)
    expected = {number: line.rsplit("# E: ", 1)[1] for number, line in enumerate(SNIPPET.splitlines(), 1)
                if "# E: " in line}
    found = {int(m.group(1)): m.group(2)
             for m in re.finditer(r"^\S+:(\d+): error: .*\[([\w-]+)\]$", result.stdout, re.M)}
    assert found == expected, result.stdout + result.stderr


def test_mypy_accepts_the_config_used_as_declared(tmp_path: Path) -> None:
    clean = "\n".join(line for line in SNIPPET.splitlines() if "# E: " not in line) + "\n"
    result = run_mypy(tmp_path, clean)
    assert result.returncode == 0, result.stdout + result.stderr
