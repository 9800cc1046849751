"""docs/troubleshooting.md's commands, as written, against a demo agent and a real Prometheus (Debian's 2.42).

The page's shell lines are read from the page itself; only ``AGENT``, ``PROM`` and the rule files' path are
replaced. Each must print what the page says it prints: a command that prints nothing when pasted is a bug.
The Alertmanager line is not run (its marker says so: no Alertmanager here, the end-to-end test covers it).
tests/e2e/test_doc_commands.py runs every page's commands for their exit status; this one reads what they print.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from agent.demo.node import DemoNode
from tests.support.agent_harness import wait_for
from tests.support.daemon import BASE_CONFIG, Daemon
from tests.support.doc_commands import page_blocks
from tests.support.paths import REPO
from tests.support.prom_harness import PromProcess, shortened_rules, start_prometheus

pytestmark = pytest.mark.slow

PAGE = REPO / "docs" / "troubleshooting.md"
RULE_FILES = sorted((REPO / "alerts").glob("*.rules.yml"))


def _page_commands() -> list[str]:
    """Every command of the page's ``sh`` blocks that its markers let run, comment removed."""
    return [command.text for block in page_blocks((PAGE,)) for command in block.run]


def _run(command: str, agent: str, prom: str, rules: Path) -> str:
    line = (command.replace("AGENT", agent).replace("PROM", prom)
            .replace("/etc/prometheus/npuwatch/*.rules.yml", f"{rules}/*.rules.yml"))
    done = subprocess.run(["sh", "-c", line], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, (line, done.stdout, done.stderr)
    return done.stdout


@pytest.fixture
def scraped(tmp_path: Path) -> Iterator[tuple[Daemon, PromProcess, Path]]:
    daemon = Daemon(tmp_path, {**BASE_CONFIG, "labels": {"node": "demo-node-1"}}, chips=4)
    prom = None
    try:
        assert wait_for(lambda: "npuwatch_collector_up" in daemon.metrics(), timeout=30), daemon.log_text()
        DemoNode(daemon.demo_dir).set_fault("link_down", chip=3)
        rules, _changes = shortened_rules(RULE_FILES, tmp_path / "rules", "2s")
        prom = start_prometheus(tmp_path, [f"127.0.0.1:{daemon.port}"], rules)
        yield daemon, prom, tmp_path / "rules"
    finally:
        if prom is not None:
            prom.stop()
        daemon.stop()


def test_the_alert_section_commands_print_what_the_page_says(scraped: tuple[Daemon, PromProcess, Path]) -> None:
    daemon, prom, rules = scraped
    commands = [c for c in _page_commands() if "PROM" in c or "promtool" in c]
    assert len(commands) == 5, commands

    def run(needle: str) -> str:
        (command,) = [c for c in commands if needle in c]
        return _run(command, daemon.url, prom.url, rules)

    assert wait_for(lambda: bool(prom.query('up{job="npuwatch"} == 1')), timeout=30)
    up = json.loads(run("query=up"))
    assert [sample["value"][1] for sample in up["data"]["result"]] == ["1"]
    targets = run("api/v1/targets").splitlines()
    assert f'"scrapeUrl":"http://127.0.0.1:{daemon.port}/metrics"' in targets and '"health":"up"' in targets
    assert '"lastError":""' in targets
    assert "SUCCESS" in run("promtool")
    assert run("api/v1/rules").strip() == '"name":"NPURoCELinkDown"'
    assert wait_for(lambda: '"alertstate":"firing"' in run("query=ALERTS"), timeout=60, step=1), run("query=ALERTS")


def test_the_collector_section_commands_answer(scraped: tuple[Daemon, PromProcess, Path]) -> None:
    daemon, prom, rules = scraped
    commands = [c for c in _page_commands() if c.startswith("curl -s AGENT")]
    assert commands, _page_commands()
    for command in commands:
        assert _run(command, daemon.url, prom.url, rules).strip(), command
    readyz = json.loads(_run("curl -s AGENT/readyz", daemon.url, prom.url, rules))
    assert {state["name"] for state in readyz["collectors"]} >= {"npu_smi_info", "fault_table"}
    assert _run("curl -s AGENT/healthz", daemon.url, prom.url, rules).strip() == "ok"
    assert "curl -s AGENT/readyz" in PAGE.read_text() and "`curl -s AGENT/healthz` lists" not in PAGE.read_text()
