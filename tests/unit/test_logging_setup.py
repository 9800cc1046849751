"""What the log shows at default verbosity and with -v."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest

from agent.core.logging_setup import setup_logging

SKIPPED = 'Execution of job "collect npu_smi" skipped: maximum number of running instances reached (1)'


@pytest.fixture(autouse=True)
def _restore_logging() -> Iterator[None]:
    root, scheduler = logging.getLogger(), logging.getLogger("apscheduler")
    handlers, root_level, scheduler_level = root.handlers[:], root.level, scheduler.level
    yield
    root.handlers[:] = handlers
    root.setLevel(root_level)
    scheduler.setLevel(scheduler_level)


def _log_as_apscheduler() -> None:
    logging.getLogger("apscheduler.scheduler").info("Added job %s", "collect npu_smi")
    logging.getLogger("apscheduler.scheduler").warning(SKIPPED)
    logging.getLogger("apscheduler.executors.default").error("Job %s raised an exception", "collect npu_smi")


def test_apscheduler_internals_are_silent_at_default_verbosity(capsys: pytest.CaptureFixture[str],
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("JOURNAL_STREAM", raising=False)
    setup_logging("info")
    _log_as_apscheduler()
    logging.getLogger("agent.core.collect").warning("npu_smi_info: no answer within 10s (killed)")
    err = capsys.readouterr().err
    assert "skipped: maximum number of running instances" not in err and "Added job" not in err
    assert "raised an exception" in err  # its errors still show
    assert "no answer within 10s" in err


def test_apscheduler_internals_show_with_verbose(capsys: pytest.CaptureFixture[str],
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("JOURNAL_STREAM", raising=False)
    setup_logging("info", verbose=True)
    _log_as_apscheduler()
    err = capsys.readouterr().err
    assert "skipped: maximum number of running instances" in err and "Added job" in err
