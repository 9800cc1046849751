"""Golden text of ``npuwatch triage`` (UTC) and the command's options.

The goldens are written by ``python -m tests.support.triage_golden``, never by a test run.
"""

from __future__ import annotations

import io
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from agent.cli import build_parser
from agent.triage import command
from agent.triage.command import parse_time
from agent.triage.engine import analyze
from agent.triage.evidence import Evidence, Window
from agent.triage.render import render_text
from tests.support import triage_golden


@pytest.fixture
def utc(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setenv("TZ", "UTC")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


@pytest.mark.parametrize(("name", "code"), [("dead_link", 2), ("two_incidents", 2), ("no_incident", 0)])
def test_golden_text(name: str, code: int, tmp_path: Path, utc: None) -> None:
    got_code, text = triage_golden.render(name, tmp_path)
    assert got_code == code
    assert text == (triage_golden.GOLDEN / f"{name}.txt").read_text()


def test_unreadable_report_text() -> None:
    report = analyze(Evidence(problems=["/x/node-a.tar.gz: unreadable bundle: not a gzip file"]), Window())
    text = render_text(report)
    assert "could not read\n  - /x/node-a.tar.gz: unreadable bundle: not a gzip file" in text
    assert text.rstrip().endswith("verdict: UNKNOWN could not read any input: /x/node-a.tar.gz: unreadable bundle: "
                                  "not a gzip file")


def test_parse_time(utc: None) -> None:
    now = 1_761_300_000.0
    assert parse_time("2h", now) == now - 7200
    assert parse_time("90m", now) == now - 5400
    assert parse_time("1761296400", now) == 1761296400.0
    assert parse_time("2025-10-24 09:00", now) == 1761296400.0
    assert parse_time("2025-10-24T09:00:00", now) == 1761296400.0
    with pytest.raises(ValueError, match="neither a duration"):
        parse_time("yesterday", now)


def test_bad_time_option_is_exit_2(tmp_path: Path) -> None:
    args = build_parser().parse_args(["triage", str(tmp_path), "--since", "soon"])
    err = io.StringIO()
    assert command.main(args, out=io.StringIO(), err=err) == 2
    assert "npuwatch triage: 'soon' is neither" in err.getvalue()
