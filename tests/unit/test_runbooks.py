"""One base URL for the runbooks: the rules carry the default, the commands and the PrometheusRule take the
setting."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

import pytest

from agent.core.runbooks import DEFAULT_RUNBOOK_BASE, rebase, runbook_base, runbook_url
from agent.diagnose import advice
from tests.support.paths import REPO


def _generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location("k8s_generate", REPO / "deploy" / "kubernetes" / "generate.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_base_is_the_setting_else_the_default() -> None:
    assert runbook_base({}) == DEFAULT_RUNBOOK_BASE
    assert runbook_base({"NPUWATCH_RUNBOOK_BASE": "https://wiki.example/rb"}) == "https://wiki.example/rb/"
    assert runbook_url("NPUWatchDown", "https://wiki.example/rb/") == "https://wiki.example/rb/NPUWatchDown.md"
    assert runbook_url("NPUCheckFailed#gemm", "https://w/") == "https://w/NPUCheckFailed.md#gemm"
    assert rebase(DEFAULT_RUNBOOK_BASE + "NPUWatchDown.md", "https://w/") == "https://w/NPUWatchDown.md"
    assert rebase("https://elsewhere/x.md", "https://w/") == "https://elsewhere/x.md"


def test_diagnose_links_on_the_same_base() -> None:
    from agent.core import runbooks
    from agent.health import verdict
    from agent.health.thresholds import fault_kind

    assert advice.RUNBOOK_BASE is runbooks.RUNBOOK_BASE
    assert verdict.runbook_url(fault_kind("link_down").runbook_alert) == runbooks.runbook_url("NPURoCELinkDown")


def test_the_prometheus_rule_takes_another_base(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    generate = _generator()
    out = tmp_path / "rule.yaml"
    assert generate.main(["--runbook-base", "https://wiki.example/rb", "-o", str(out)]) == 0
    text = out.read_text(encoding="utf-8")
    assert "runbook_url: https://wiki.example/rb/NPUWatchDown.md" in text
    assert DEFAULT_RUNBOOK_BASE not in text
    monkeypatch.setenv("NPUWATCH_RUNBOOK_BASE", "https://wiki.example/rb")
    assert generate.main(["--check"]) == 2  # the committed file keeps the default
    monkeypatch.delenv("NPUWATCH_RUNBOOK_BASE")
    assert generate.main(["--check"]) == 0
