"""The golden ``npuwatch check --json`` document (tests/fixtures/check/quick-faults.json) and its run.

A demo node with two faults, its clock frozen, checked by the real command in a child process; what
changes from run to run (times, the demo directory) is masked. After a deliberate change of the
document, regenerate with ``python -m tests.support.check_golden`` and review the diff like any other change.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import yaml

from agent.demo.node import DemoNode
from tests.support.golden import report_rewritten, write_if_changed
from tests.support.paths import REPO

GOLDEN = REPO / "tests" / "fixtures" / "check" / "quick-faults.json"
FROZEN = 1_790_000_000.0  # the fakes' clock for the golden run: optics and counters hold still
VOLATILE = ("started_at", "duration_s", "read_s")


def npuwatch(*args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=str(REPO))
    return subprocess.run([sys.executable, "-m", "agent", *args], capture_output=True, text=True, timeout=timeout,
                          env=env, cwd=REPO, check=False)


def write_config(path: Path) -> Path:
    path.write_text(yaml.safe_dump({
        "collectors": {"npu_smi": {"timeout": "3s"}, "hccn_tool": {"timeout": "3s"}, "hccl_logs": {"paths": []}},
        "check": {"skip": ["agent"]},
        "labels": {"node": "golden-node"},
    }))
    return path


def stable(document: Any, demo_dir: Path) -> Any:
    """The document without what changes from run to run: times, and the demo directory's path."""
    if isinstance(document, dict):
        return {key: ("<volatile>" if key in VOLATILE else stable(value, demo_dir)) for key, value in document.items()}
    if isinstance(document, list):
        return [stable(item, demo_dir) for item in document]
    if isinstance(document, str):
        return document.replace(str(demo_dir), "<demo>")
    return document


def golden_run(tmp_path: Path) -> tuple[int, str, Any]:
    """(exit code, stderr, the stable document) of the golden case, run in ``tmp_path``."""
    demo = DemoNode(tmp_path / "demo").create(chips=2)
    demo.freeze_time(FROZEN)
    demo.set_fault("link_down", chip=1)
    demo.set_fault("health", chip=0, state="Warning", codes="80E18005")
    result = npuwatch("check", "--demo", "--demo-dir", str(demo.directory), "--demo-chips", "2", "--json",
                      "--config", str(write_config(tmp_path / "config.yaml")))
    return result.returncode, result.stderr, stable(json.loads(result.stdout), demo.directory)


def regenerate() -> list[Path]:
    changed: list[Path] = []
    with tempfile.TemporaryDirectory() as tmp:
        _, _, document = golden_run(Path(tmp))
    write_if_changed(GOLDEN, json.dumps(document, indent=2, sort_keys=False) + "\n", changed)
    return changed


if __name__ == "__main__":
    report_rewritten(regenerate())
