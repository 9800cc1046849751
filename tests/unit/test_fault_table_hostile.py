"""A fault table file that is valid JSON to a lax parser but holds what the rules cannot take (``Infinity``,
``1e400``, a 400-digit integer, nesting deeper than the parser's stack): no traceback anywhere; check-config
says why, and the agent uses the packaged copy of that file and logs it."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from agent.cli import main
from agent.core.config import load_config
from agent.handling.levels import table_of
from collectors.fault_levels import ESCALATION_FILE, default_table

_RULE = '{{"FaultFrequency": [{{"EventId": ["80C98000"], "TimeWindow": {window}, "Times": 2, ' \
        '"FaultHandling": "ManuallySeparateNPU"}}]}}'

HOSTILE = {
    "Infinity": (_RULE.format(window="Infinity"), "Infinity is not a number JSON allows"),
    "-Infinity": (_RULE.format(window="-Infinity"), "-Infinity is not a number JSON allows"),
    "NaN": (_RULE.format(window="NaN"), "NaN is not a number JSON allows"),
    "1e400": (_RULE.format(window="1e400"), "1e400 is too large"),
    "400 digits": (_RULE.format(window="9" * 400), "a 400-digit integer is too large"),
    "deep": ("[" * 100_000 + "]" * 100_000, "nested too deeply"),
}


def _config(tmp_path: Path, text: str, key: str = "escalation_file") -> tuple[Path, Path]:
    bad = tmp_path / "faultCustomization.json"
    bad.write_text(text, encoding="utf-8")
    config = tmp_path / "config.yaml"
    config.write_text(f"faults:\n  {key}: {bad}\n", encoding="utf-8")
    return bad, config


@pytest.mark.parametrize("name", HOSTILE)
def test_the_agent_uses_the_packaged_escalation_and_logs_why(tmp_path: Path, name: str,
                                                            caplog: pytest.LogCaptureFixture) -> None:
    text, why = HOSTILE[name]
    bad, config = _config(tmp_path, text)
    with caplog.at_level(logging.ERROR, logger="agent.handling.levels"):
        table = table_of(load_config(str(config)))
    assert table.frequency == default_table().frequency
    assert table.duration == default_table().duration
    assert table.files[1] == str(ESCALATION_FILE)
    assert [record.getMessage() for record in caplog.records] == [
        f"fault escalation not loaded ({bad}: {why}); using the packaged {ESCALATION_FILE.name}"]


@pytest.mark.parametrize("name", HOSTILE)
def test_check_config_names_the_problem_without_a_traceback(tmp_path: Path, name: str,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    text, why = HOSTILE[name]
    bad, config = _config(tmp_path, text)
    assert main(["check-config", str(config)]) == 0
    captured = capsys.readouterr()
    assert f"fault escalation not loaded ({bad}: {why})" in captured.out
    assert "Traceback" not in captured.out + captured.err


@pytest.mark.parametrize("name", ["Infinity", "400 digits", "deep"])
def test_a_hostile_codes_file_falls_back_too(tmp_path: Path, name: str) -> None:
    text = HOSTILE[name][0].replace("FaultFrequency", "SeparateNPUCodes") if name != "deep" else HOSTILE[name][0]
    _, config = _config(tmp_path, text, key="codes_file")
    table = table_of(load_config(str(config)))
    assert table.levels == default_table().levels
