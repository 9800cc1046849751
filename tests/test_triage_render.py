"""Golden text of ``npuwatch triage`` (UTC) and the command's options.

Regenerate the goldens after a deliberate change with ``NPUWATCH_UPDATE_GOLDEN=1`` and read the diff.
"""

from __future__ import annotations

import io
import os
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
from tests.triage_scenarios import T0, Cluster

GOLDEN = Path(__file__).parent / "fixtures" / "triage"


@pytest.fixture
def utc(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setenv("TZ", "UTC")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


def text_of(*argv: str) -> tuple[int, str]:
    args = build_parser().parse_args(["triage", "--jobs", "1", *argv])
    out = io.StringIO()
    return command.main(args, out=out, err=io.StringIO()), out.getvalue()


def check_golden(name: str, text: str) -> None:
    path = GOLDEN / name
    if os.environ.get("NPUWATCH_UPDATE_GOLDEN"):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    assert text == path.read_text()


def test_golden_dead_link(tmp_path: Path, utc: None) -> None:
    cluster = Cluster(tmp_path).write()
    cluster.link_down(2, 1, T0 - 330)
    dead = cluster.rank(2, 1)
    cluster.timeouts([r for r in range(cluster.size) if r != dead], T0, peers=[(cluster.device_ip(2, 1), dead)],
                     state="lost")
    cluster.cqe(cluster.rank(2, 0), T0 - 320, cluster.device_ip(2, 1))
    code, text = text_of(*cluster.paths())
    assert code == 1
    check_golden("dead_link.txt", text)


def test_golden_two_incidents_one_unknown(tmp_path: Path, utc: None) -> None:
    first = Cluster(tmp_path, nodes=2, group="10.0.0.1%enp_60000_0_1").write()
    hung = first.rank(1, 2)
    first.timeouts([r for r in range(first.size) if r != hung], T0, peers=[(first.device_ip(1, 2), hung)],
                   state="stuck")
    first.noise(hung, T0 + 1200)
    second = Cluster(tmp_path, nodes=1, group="10.0.0.3%enp_60000_0_2", offset=2).write()
    second.timeouts(list(range(second.size)), T0 + 3000)
    code, text = text_of(*first.paths(), *second.paths())
    assert code == 2
    check_golden("two_incidents.txt", text)


def test_golden_no_incident(tmp_path: Path, utc: None) -> None:
    cluster = Cluster(tmp_path, nodes=2).write()
    code, text = text_of(*cluster.paths(), "--since", "2025-10-24 09:00", "--until", "2025-10-24T11:00:00")
    assert code == 0
    check_golden("no_incident.txt", text)


def test_unreadable_report_text() -> None:
    report = analyze(Evidence(problems=["/x/node-a.tar.gz: unreadable bundle: not a gzip file"]), Window())
    text = render_text(report)
    assert "could not read\n  - /x/node-a.tar.gz: unreadable bundle: not a gzip file" in text
    assert text.rstrip().endswith("verdict: could not read any input: /x/node-a.tar.gz: unreadable bundle: not a "
                                  "gzip file")


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
