"""Every shell command of the manual (README.md and docs/*.md), run as written against a demo agent and a
real Prometheus (Debian's 2.42), must end with the status its page expects (0 unless a marker says
otherwise; tests/support/doc_commands.py reads the pages and their markers).

Only the placeholders the pages define are replaced: ``AGENT`` (the agent's URL), ``PROM`` (Prometheus's)
and the installed rule files' path. The commands run under ``sh`` with the npuwatch of this Python on the
PATH and ``NPUWATCH_DEMO_DIR`` naming the agent's demo node (what a user who started ``./scripts/demo``
has), each block on a fresh demo node and agent, in a fresh directory that shows the repository's files
(so ``alerts/...`` resolves and what a block writes stays there). What cannot run here
(root, systemd, hardware, a cluster) is skipped by its page's marker, never here.
"""

from __future__ import annotations

import contextlib
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.support.agent_harness import wait_for
from tests.support.daemon import BASE_CONFIG, Daemon
from tests.support.doc_commands import Block, Command, page_blocks
from tests.support.paths import REPO
from tests.support.prom_harness import PromProcess, shortened_rules, start_prometheus

pytestmark = pytest.mark.slow

BLOCKS = [block for block in page_blocks() if block.run]
RULES_PATH = "/etc/prometheus/npuwatch/*.rules.yml"
COMMAND_TIMEOUT_S = 240  # a medium check on the CPU takes about 30 s on a loaded 2-core machine


@dataclass(frozen=True)
class Stack:
    daemon: Daemon
    prom: PromProcess | None  # for a block that asks Prometheus
    rules: Path
    workdir: Path


@contextlib.contextmanager
def _stack(tmp: Path, block: Block) -> Iterator[Stack]:
    """A fresh demo node and its agent for ``block`` (faults and their history from another block would
    change what a command prints), and Prometheus scraping it when the block asks one."""
    daemon = Daemon(tmp, {**BASE_CONFIG, "labels": {"node": "demo-node-1"}}, chips=8)
    prom = None
    try:
        assert wait_for(lambda: "npuwatch_collector_up" in daemon.metrics(), timeout=30), daemon.log_text()
        rules, _changes = shortened_rules(sorted((REPO / "alerts").glob("*.rules.yml")), tmp / "rules", "2s")
        if any(re.search(r"\bPROM\b", command.text) for command in block.run):
            prom = start_prometheus(tmp, [f"127.0.0.1:{daemon.port}"], rules)
            assert wait_for(lambda: bool(prom.query('up{job="npuwatch"} == 1')), timeout=30)
        yield Stack(daemon, prom, tmp / "rules", tmp / "block")
    finally:
        if prom is not None:
            prom.stop()
        daemon.stop()


def _workdir(workdir: Path) -> Path:
    """A fresh directory showing the repository's top-level files."""
    workdir.mkdir(parents=True)
    for entry in REPO.iterdir():
        if not entry.name.startswith("."):
            (workdir / entry.name).symlink_to(entry)
    return workdir


def _line(command: Command, stack: Stack) -> str:
    line = re.sub(r"\bAGENT\b", stack.daemon.url, command.text)
    if stack.prom is not None:
        line = re.sub(r"\bPROM\b", stack.prom.url, line)
    return line.replace(RULES_PATH, f"{stack.rules}/*.rules.yml")


def _environment(stack: Stack) -> dict[str, str]:
    return {**os.environ,
            "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
            "PYTHONPATH": os.pathsep.join(filter(None, (str(REPO), os.environ.get("PYTHONPATH")))),
            "NPUWATCH_DEMO_DIR": str(stack.daemon.demo_dir)}


def test_the_pages_have_commands_to_run() -> None:
    pages = {block.page for block in BLOCKS}
    assert {"docs/demo.md", "docs/check.md", "docs/troubleshooting.md"} <= pages, pages


@pytest.mark.parametrize("block", [pytest.param(b, id=f"{b.page}:{b.line}") for b in BLOCKS])
def test_the_block_runs_as_written(block: Block, tmp_path: Path) -> None:
    with _stack(tmp_path, block) as stack:
        workdir = _workdir(stack.workdir)
        env = _environment(stack)
        for command in block.run:
            line = _line(command, stack)
            done = subprocess.run(["sh", "-c", line], cwd=workdir, env=env, capture_output=True, text=True,
                                  timeout=COMMAND_TIMEOUT_S)
            assert done.returncode == command.exit, (
                f"{command.where}: {line}\nexit {done.returncode}, the page expects {command.exit}\n"
                f"stdout:\n{done.stdout[-3000:]}\nstderr:\n{done.stderr[-3000:]}")
