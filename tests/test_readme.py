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


def test_ci_runs_the_readme_test_command() -> None:
    block = README.split("## Run the tests on a fresh machine", 1)[1].split("```sh", 1)[1].split("```", 1)[0]
    test_command = block.strip().splitlines()[-1].strip()
    ci_lines = [line.strip() for line in (REPO / ".ci" / "run").read_text().splitlines()]
    assert test_command in ci_lines
    assert ci_lines[-1] == test_command
    for package in ("prometheus", "prometheus-alertmanager"):
        assert package in (REPO / ".ci" / "run").read_text()


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
