"""The command line as operators type it."""

from __future__ import annotations

import pytest

from agent import __version__
from agent.cli import main


def test_version_and_help(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        main(["--version"])
    assert info.value.code == 0
    assert capsys.readouterr().out.strip() == f"npuwatch {__version__}"
    with pytest.raises(SystemExit):
        main(["--help"])
    text = capsys.readouterr().out
    for command in ("run", "once", "check-config", "scan-logs", "diagnose", "probe", "demo"):
        assert command in text
