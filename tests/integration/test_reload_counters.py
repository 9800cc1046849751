"""Counters never go down across a reload: the HCCL log scanner's counts and offsets live on in memory
when the state file cannot be written (a full disk), whether the reload keeps the scanner's settings or
changes them; the logs that were counted may be gone by then (CANN deletes its oldest plog files)."""

from __future__ import annotations

import errno
import os
import tempfile
from pathlib import Path

import pytest

from agent.core.config import apply_overrides, build_config
from agent.daemon.assemble import build_agent
from agent.daemon.service import Agent
from tests.support.agent_harness import fast_config

EI0002 = "EI0002: [PID: 1] 2026-01-01-{hour:02d}:00:00.000.000 The wait execution of the Notify register times " \
         "out. remote rank [3].\n"


def _count(agent: Agent) -> float:
    agent.run_internal_by_name("hccl_logs")
    for line in agent.cache.render().body.decode().splitlines():
        if line.startswith("npu_hccl_errors_total{") and 'code="EI0002"' in line:
            return float(line.rsplit(" ", 1)[1])
    raise AssertionError("no npu_hccl_errors_total for EI0002")


def _incidents(log: Path, *hours: int) -> None:
    with log.open("a", encoding="utf-8") as handle:
        handle.writelines(EI0002.format(hour=hour) for hour in hours)


@pytest.mark.parametrize("change", [{"labels.node": "after"}, {"collectors.hccl_logs.byte_budget": 32 << 20},
                                    {"collectors.hccl_logs.enabled": False}])
def test_hccl_error_counts_survive_a_reload_while_the_state_file_cannot_be_written(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, change: dict[str, object]) -> None:
    root = tmp_path / "log"
    (root / "debug" / "plog").mkdir(parents=True)
    log = root / "debug" / "plog" / "plog-1_1.log"
    config = build_config(fast_config({"state_dir": str(tmp_path / "state"),
                                       "collectors": {"hccl_logs": {"enabled": True, "paths": [str(root)]}}}))
    agent = build_agent(config).agent
    try:
        _incidents(log, 0, 2, 4)
        assert _count(agent) == 3  # written to the state file
        with monkeypatch.context() as patch:
            def no_space(*args: object, **kwargs: object) -> tuple[int, str]:
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

            patch.setattr(tempfile, "mkstemp", no_space)
            rotated = log.with_name("plog-1_2.log")
            _incidents(rotated, 6, 8, 10, 12, 14)
            assert _count(agent) == 8  # in memory only: the file still says 3
            rotated.unlink()  # CANN keeps a bounded number of plog files: the oldest are deleted
            assert agent.reload(apply_overrides(agent.config, change))
            if change.get("collectors.hccl_logs.enabled") is False:
                assert agent.reload(config)
            assert _count(agent) == 8
            _incidents(log, 16)
            assert _count(agent) == 9  # counted once: the offsets came along with the counts
        _incidents(log, 18)
        assert _count(agent) == 10
    finally:
        agent.stop()
