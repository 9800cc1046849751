"""Helpers for the `npuwatch check` tests: a demo node, a config, one run through the CLI entry."""

from __future__ import annotations

import argparse
import io
import json
from pathlib import Path
from typing import Any

from agent.check import cli as check_cli
from agent.core.config import build_config
from tests.support.agent_harness import free_port, merged

CHIPS = 4


def check_config(extra: dict[str, Any] | None = None) -> Any:
    """Fast tool timeouts, no log directory but the demo's, an agent port nothing listens on."""
    raw: dict[str, Any] = {
        "web": {"listen_address": "127.0.0.1", "port": free_port()},
        "collectors": {"npu_smi": {"timeout": "3s"}, "hccn_tool": {"timeout": "3s"},
                       "hccl_logs": {"paths": []}},
        "check": {"tool_timeout": "2s"},
    }
    return build_config(merged(raw, extra or {}))


def run_check(demo_dir: Path, config: Any, *, level: str = "quick", only: tuple[str, ...] = (),
              condition: str | None = None, exit_codes: str = "nagios", as_json: bool = True,
              baseline: str | None = None) -> tuple[int, Any]:
    """(exit code, the JSON report or the text) of one `npuwatch check` run on the demo node."""
    args = argparse.Namespace(level=level, json=as_json, exit_codes=exit_codes, only=only, condition=condition,
                              baseline=baseline, prometheus=None, list=False, demo_chips=CHIPS)
    out = io.StringIO()
    code = check_cli.main(args, config, demo_dir, out=out)
    text = out.getvalue()
    return code, json.loads(text) if as_json else text


def by_name(report: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {check["name"]: check for check in report["checks"]}


def failing_npus(check: dict[str, Any], status: str = "FAIL") -> set[int | None]:
    return {result["npu"] for result in check["results"] if result["status"] == status}
