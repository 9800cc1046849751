"""The README's references stay true: metric table, commands, CI's test command."""

from __future__ import annotations

import re
from pathlib import Path

from agent.cli import build_parser
from collectors.catalogue import CATALOGUE

REPO = Path(__file__).resolve().parents[1]
README = (REPO / "README.md").read_text(encoding="utf-8")
ROW = re.compile(r"^\| `(?P<name>npu[a-z0-9_]*)` \| (?P<type>\w+) \| (?P<labels>[^|]*) \| (?P<source>[^|]*) \|$", re.M)


def _metric_rows() -> dict[str, tuple[str, tuple[str, ...]]]:
    rows = {}
    for match in ROW.finditer(README):
        labels = match.group("labels").strip()
        rows[match.group("name")] = (
            match.group("type"),
            () if labels == "—" else tuple(label.strip() for label in labels.split(",")),
        )
    return rows


def test_metric_reference_matches_the_catalogue() -> None:
    rows = _metric_rows()
    assert set(rows) == set(CATALOGUE)
    for name, spec in CATALOGUE.items():
        assert rows[name] == (spec.type, spec.labels), name


def test_readme_commands_exist_in_the_cli() -> None:
    parser = build_parser()
    subcommands = next(a for a in parser._actions if a.dest == "command").choices
    for command in re.findall(r"^\| `npuwatch ([a-z-]+)", README, re.M):
        assert command in subcommands, command


def readme_command(section: str) -> str:
    """The one command in the first ``sh`` block of a README section."""
    block = README.split(f"## {section}", 1)[1].split("```sh", 1)[1].split("```", 1)[0]
    lines = [line.strip() for line in block.strip().splitlines()]
    assert len(lines) == 1, f"{section}: one command, not {lines}"
    return lines[0]


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


def _config_leaves(schema: object, path: str = "") -> list[str]:
    from collections.abc import Mapping

    assert isinstance(schema, Mapping)
    out: list[str] = []
    for key, value in schema.items():
        dotted = f"{path}.{key}" if path else key
        out.extend(_config_leaves(value, dotted) if isinstance(value, Mapping) else [dotted])
    return out


def test_every_config_key_is_in_the_reference() -> None:
    from agent.core.config import SCHEMA

    reference = README.split("## Configuration reference", 1)[1].split("\n## ", 1)[0]
    rows = [line.split("|")[1] for line in reference.splitlines() if line.startswith("| `")]
    missing = []
    for leaf in _config_leaves(SCHEMA):
        section, _, last = leaf.rpartition(".")
        named = any(f"`{leaf}`" in row or (section and f"`{section}." in row and f"`.{last}`" in row)
                    for row in rows)
        if not named:
            missing.append(leaf)
    assert missing == []
