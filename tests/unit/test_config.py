"""Config: defaults, validation with paths, exit 2 from the CLI."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
import yaml

from agent.cli import main
from agent.core.config import ConfigError, build_config, default_config, load_config, parse_duration, parse_size
from tests.support.paths import REPO


def test_every_setting_has_a_default() -> None:
    config = default_config()
    assert config.web.port == 9611
    assert config.collectors.npu_smi.interval == 10.0
    assert config.collectors.npu_smi.usages_interval == 30.0
    assert config.collectors.npu_smi.health_interval == 60.0
    assert config.collectors.npu_smi.inventory_interval == 600.0
    assert config.probes.gemm.interval == 3600.0
    assert config.probes.allreduce.interval == 6 * 3600.0


def test_bad_duration_is_reported_with_its_path() -> None:
    with pytest.raises(ConfigError) as info:
        build_config({"collectors": {"npu_smi": {"interval": "fast"}}})
    assert 'collectors.npu_smi.interval: expected a duration like 10s, got "fast"' in info.value.problems


def test_all_problems_are_listed_at_once() -> None:
    with pytest.raises(ConfigError) as info:
        build_config({"bogus": 1, "web": {"port": "http"}, "probes": {"gemm": {"min_efficiency": 3}}})
    problems = "\n".join(info.value.problems)
    assert "bogus: unknown setting" in problems
    assert "web.port: expected an integer" in problems
    assert "probes.gemm.min_efficiency: expected a ratio" in problems
    assert len(info.value.problems) == 3


def test_node_label_defaults_from_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NODE_NAME", "npu-node-17")
    assert default_config().labels == {"node": "npu-node-17"}
    assert build_config({"labels": {"node": "explicit"}}).labels == {"node": "explicit"}


def test_reserved_label_names_are_refused() -> None:
    with pytest.raises(ConfigError, match="labels: label name 'npu'"):
        build_config({"labels": {"npu": "x"}})


@pytest.mark.parametrize(("text", "seconds"), [("10s", 10), ("5m", 300), ("1.5h", 5400), ("250ms", 0.25), (7, 7)])
def test_durations(text: object, seconds: float) -> None:
    assert parse_duration(text) == seconds


def test_sizes() -> None:
    assert parse_size("64MiB") == 64 << 20
    assert parse_size(4096) == 4096
    with pytest.raises(ValueError):
        parse_size("lots")


def test_yaml_syntax_error_names_the_line(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    path.write_text("web:\n  port: [9611\n")
    with pytest.raises(ConfigError, match="not valid YAML at line"):
        load_config(path)


def test_shipped_example_is_valid() -> None:
    config = load_config(REPO / "systemd" / "config.example.yaml")
    assert config.expected_chips == 0  # an example value is never live: the install learns the count


def _differences(raw: dict, example: object, default: object, path: str = "") -> list[str]:
    found = []
    for key, value in raw.items():
        where = f"{path}.{key}" if path else key
        mine, theirs = getattr(example, key), getattr(default, key)
        if isinstance(value, dict) and dataclasses.is_dataclass(mine):
            found += _differences(value, mine, theirs, where)
        elif mine != theirs:
            found.append(where)
    return found


def test_every_value_the_example_sets_is_the_default() -> None:
    """The example says its values are the defaults: a non-default value there is commented out and marked."""
    path = REPO / "systemd" / "config.example.yaml"
    raw = yaml.safe_load(path.read_text())
    assert _differences(raw, load_config(path), build_config({})) == []
    live_examples = [line for line in path.read_text().splitlines()
                     if "example" in line.split("#", 1)[-1] and not line.lstrip().startswith("#")]
    assert live_examples == []


def test_check_config_cli_exit_codes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    good = tmp_path / "good.yaml"
    good.write_text("collectors:\n  npu_smi:\n    interval: 5s\n")
    assert main(["check-config", str(good)]) == 0
    bad = tmp_path / "bad.yaml"
    bad.write_text("collectors:\n  npu_smi:\n    interval: fast\n")
    assert main(["check-config", str(bad)]) == 2
    err = capsys.readouterr().err
    assert 'collectors.npu_smi.interval: expected a duration like 10s, got "fast"' in err


def test_run_with_bad_config_starts_nothing(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("web:\n  port: -1\n")
    assert main(["run", "--config", str(bad)]) == 2
