"""The config an install writes (agent.core.live_config) from the shipped example: no example value is live."""

from __future__ import annotations

import yaml

from agent.core.config import build_config
from agent.core.live_config import live_config
from tests.support.paths import REPO

EXAMPLE = (REPO / "systemd" / "config.example.yaml").read_text()


def _live_lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if not line.lstrip().startswith("#")]


def test_a_learned_chip_count_is_set_and_said_where_it_came_from() -> None:
    text = live_config(EXAMPLE, 4, "npu-smi info lists 4 chips")
    assert "expected_chips: 4              # learned at install: npu-smi info lists 4 chips; check it" in text
    assert [line for line in _live_lines(text) if line.startswith("expected_chips")] == [
        "expected_chips: 4              # learned at install: npu-smi info lists 4 chips; check it"]
    assert build_config(yaml.safe_load(text)).expected_chips == 4


def test_without_a_chip_count_the_example_is_written_as_it_is() -> None:
    assert live_config(EXAMPLE, 0, "npu-smi: not found") == EXAMPLE


def test_an_example_value_switched_on_is_commented_out() -> None:
    planted = EXAMPLE.replace("labels: {}", "labels:\n  cluster: train-a              # example", 1)
    planted = planted.replace("# expected_chips: 8             # example", "expected_chips: 8  # example", 1)
    text = live_config(planted, 0, "npu-smi: not found")
    assert [line for line in _live_lines(text) if "example" in line] == []
    assert "  # cluster: train-a              # example" in text
