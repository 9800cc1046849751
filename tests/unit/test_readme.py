"""The README stays a front page that tells the truth: its commands exist, CI runs its test command.

The metric and configuration references it once held are generated pages of docs/ now (tests/unit/test_docs.py).
"""

from __future__ import annotations

import re

from agent.cli import build_parser
from tests.support.paths import REPO
from tests.support.readme import README, readme_command


def test_readme_commands_exist_in_the_cli() -> None:
    parser = build_parser()
    subcommands = next(a for a in parser._actions if a.dest == "command").choices
    for command in re.findall(r"^\| `npuwatch ([a-z-]+)", README, re.M):
        assert command in subcommands, command


def test_ci_runs_the_readme_test_command_and_nothing_else() -> None:
    test_command = readme_command("Run the tests on a fresh machine")
    ci_lines = [line.strip() for line in (REPO / ".ci" / "run").read_text().splitlines()]
    doing = [line for line in ci_lines if line and not line.startswith("#")
             and line not in ("set -euo pipefail", 'cd "$(dirname "$0")/.."')]
    assert doing == [f"exec {test_command}"]
    script = (REPO / test_command.split()[0].removeprefix("./")).read_text()
    for package in ("prometheus", "prometheus-alertmanager"):
        assert package in script


def test_the_demo_command_is_one_script() -> None:
    assert readme_command("Try it on a fresh machine") == "./scripts/demo"


def test_the_readme_is_a_front_page() -> None:
    # 300 lines as a reader sees them, with its two generated pictures (a top frame, a diagnose report); the
    # shell-test markers above its blocks are HTML comments GitHub does not show.
    shown = [line for line in README.splitlines() if not line.startswith("<!-- shell-test")]
    assert len(shown) <= 300
    assert "## Contents" in README
    for section in ("Try it on a fresh machine", "Run the tests on a fresh machine", "Install",
                    "Prometheus scrape config", "Commands", "Dashboards and alerts", "Documentation"):
        assert f"\n## {section}\n" in README, section
