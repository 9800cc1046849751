"""A fault table file with a bad entry: the entry is skipped and the rest used, and the skip is logged, exported
(``npuwatch_fault_table_skipped_entries``) and shown by ``npuwatch check-config``."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from agent.cli import main
from agent.core.config import load_config
from agent.handling.levels import table_of
from agent.handling.metrics import SKIPPED_METRIC, table_samples
from collectors.catalogue import spec
from collectors.fault_levels import CODES_FILE, ESCALATION_FILE, default_table


def _files(tmp_path: Path) -> tuple[Path, Path, Path]:
    codes = tmp_path / "faultCode.json"
    codes.write_text(json.dumps({"SeparateNPUCodes": ["CD", 7], "RestartNPUCodes": None}), encoding="utf-8")
    escalation = tmp_path / "faultCustomization.json"
    escalation.write_text(json.dumps({"FaultFrequency": [
        {"EventId": ["AB"], "TimeWindow": 30, "Times": 2, "FaultHandling": "ManuallySeparateNPU"},
        {"EventId": ["EF"], "TimeWindow": 3600, "Times": 2, "FaultHandling": "RestartNPU"},
        {"EventId": ["CD"], "TimeWindow": 3600, "Times": 2, "FaultHandling": "ManuallySeparateNPU"},
    ]}), encoding="utf-8")
    config = tmp_path / "config.yaml"
    config.write_text(f"faults:\n  codes_file: {codes}\n  escalation_file: {escalation}\n", encoding="utf-8")
    return codes, escalation, config


def test_each_file_exports_how_many_entries_were_skipped(tmp_path: Path) -> None:
    codes, escalation, config = _files(tmp_path)
    table = table_of(load_config(str(config)))
    values = {dict(sample.labels)["file"]: sample.value for sample in table_samples(table)}
    assert values == {str(codes): 1.0, str(escalation): 2.0}
    assert spec(SKIPPED_METRIC).labels == ("file",)


def test_the_packaged_table_skips_nothing() -> None:
    values = {dict(sample.labels)["file"]: sample.value for sample in table_samples(default_table())}
    assert values == {str(CODES_FILE): 0.0, str(ESCALATION_FILE): 0.0}


def test_each_skipped_entry_is_logged(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    _, escalation, config = _files(tmp_path)
    with caplog.at_level(logging.WARNING, logger="agent.handling.levels"):
        table_of(load_config(str(config)))
    lines = [record.getMessage() for record in caplog.records]
    assert f"fault table: {escalation}: FaultFrequency[0] skipped (TimeWindow 30 is outside 60-864000)" in lines
    assert len(lines) == 3


def test_check_config_shows_each_skipped_entry(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    codes, escalation, config = _files(tmp_path)
    assert main(["check-config", str(config)]) == 0
    out = capsys.readouterr().out.splitlines()
    prefix = f"{config}: warning: fault table: "
    warnings = [line[len(f"{config}: "):] for line in out if line.startswith(prefix)]
    assert warnings == [
        f"warning: fault table: {codes}: SeparateNPUCodes entry 7 skipped (not a hex code)",
        f"warning: fault table: {escalation}: FaultFrequency[0] skipped (TimeWindow 30 is outside 60-864000)",
        f"warning: fault table: {escalation}: FaultFrequency[1] skipped (FaultHandling RestartNPU needs a "
        "ReleaseTimeWindow)",
    ]
    assert out[-1].endswith("valid config (listen 0.0.0.0:9611)")


def test_check_config_of_a_clean_table_warns_nothing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = tmp_path / "config.yaml"
    config.write_text("state_dir: /tmp\n", encoding="utf-8")
    assert main(["check-config", str(config)]) == 0
    assert "warning: fault table" not in capsys.readouterr().out  # other warnings (log paths) are check-config's
