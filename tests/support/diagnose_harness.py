"""Running ``npuwatch diagnose`` in-process on a demo node and reading its JSON, for the diagnose tests."""

from __future__ import annotations

import argparse
import json
from typing import Any

import pytest

from agent.core.config import build_config
from agent.demo.node import DemoNode
from agent.diagnose import engine as diagnose

__all__ = ["GAP_S", "by_name", "make_config", "run"]

GAP_S = 0.2  # the sampling gap: short, so a test waits fractions of a second


def make_config(tmp_path: Any, timeout: str = "3s", log_paths: list[str] | None = None, **extra: Any) -> Any:
    raw: dict[str, Any] = {
        "collectors": {
            "npu_smi": {"timeout": timeout},
            "hccn_tool": {"timeout": timeout, "hccn_conf": str(tmp_path / "hccn.conf")},
        },
    }
    if log_paths is not None:
        raw["collectors"]["hccl_logs"] = {"paths": log_paths}
    raw.update(extra)
    return build_config(raw)


def run(node: DemoNode, capsys: pytest.CaptureFixture[str], config: Any, *, as_json: bool = True,
        probes: bool = False) -> tuple[int, Any]:
    args = argparse.Namespace(json=as_json, probes=probes, verbose=False, sample_gap=GAP_S)
    code = diagnose.main(args, config, node.directory)
    out = capsys.readouterr().out
    return code, json.loads(out) if as_json else out


def by_name(report: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {check["name"]: check for check in report["checks"]}
