"""The shipped rule files and promtool cases as data, for the tests that read them."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import yaml

from tests.support.paths import REPO

__all__ = ["RULE_FILES", "TEST_FILES", "alert_rules", "alert_tests", "load_yaml", "rules"]

RULE_FILES = sorted((REPO / "alerts").glob("*.rules.yml"))
TEST_FILES = sorted((REPO / "alerts" / "tests").glob("*-test.yml"))


def load_yaml(path: Path) -> dict[str, Any]:
    with path.open(encoding="utf-8") as handle:
        data = yaml.safe_load(handle)
    assert isinstance(data, dict), f"{path} is not a YAML mapping"
    return data


def rules(files: Iterable[Path] = RULE_FILES) -> Iterator[tuple[Path, dict[str, Any]]]:
    for path in files:
        for group in load_yaml(path)["groups"]:
            for rule in group["rules"]:
                yield path, rule


def alert_rules(files: Iterable[Path] = RULE_FILES) -> list[tuple[Path, dict[str, Any]]]:
    return [(path, rule) for path, rule in rules(files) if "alert" in rule]


def alert_tests(files: Iterable[Path] = TEST_FILES) -> Iterator[tuple[Path, dict[str, Any]]]:
    for path in files:
        for case in load_yaml(path)["tests"]:
            for check in case.get("alert_rule_test", []):
                yield path, check
