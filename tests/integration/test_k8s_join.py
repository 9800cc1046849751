"""The PromQL joins docs/kubernetes.md documents for npu_pod_info, and the node dashboard's "Who is on the sick
chip" query, evaluated by promtool on series shaped like a real scrape (target labels job/instance/node)."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import yaml

from dashboards.node_detail import sick_chip_pods_query
from dashboards.queries import substitute
from tests.support.paths import REPO

MANUAL = (REPO / "docs" / "kubernetes.md").read_text(encoding="utf-8")
TARGET = 'job="npuwatch",instance="10.0.0.7:9611",node="npu-node-07"'


def _series(metric: str, value: str, **labels: str) -> dict[str, str]:
    extra = "".join(f',{key}="{val}"' for key, val in labels.items())
    return {"series": f"{metric}{{{TARGET}{extra}}}", "values": value}


def _labels(**labels: str) -> str:
    return "{" + ", ".join(f'{k}="{v}"' for k, v in {**dict(re.findall(r'(\w+)="([^"]*)"', TARGET)),
                                                          **labels}.items()) + "}"


def promtool_test(tmp_path: Path, series: list[dict[str, str]],
                  cases: list[dict[str, Any]]) -> subprocess.CompletedProcess[str]:
    promtool = shutil.which("promtool")
    assert promtool, "promtool missing: apt-get install prometheus (CI installs it)"
    (tmp_path / "empty.rules.yml").write_text("groups: []\n")
    test = {"rule_files": ["empty.rules.yml"], "evaluation_interval": "1m",
            "tests": [{"interval": "1m", "input_series": series, "promql_expr_test": cases}]}
    (tmp_path / "join-test.yml").write_text(yaml.safe_dump(test, sort_keys=False))
    return subprocess.run([promtool, "test", "rules", "join-test.yml"], cwd=tmp_path, capture_output=True,
                          text=True, timeout=60, check=False)


def documented(prefix: str) -> str:
    """The manual's join line that starts with ``prefix``."""
    return next(line.strip().strip("`") for line in MANUAL.splitlines() if line.strip().strip("`").startswith(prefix))


CHIPS = [
    _series("npu_healthy", "1x5", npu="2", chip="0"),
    _series("npu_healthy", "0x5", npu="3", chip="0"),
    _series("npu_healthy", "0x5", npu="6", chip="0"),  # sick, but no pod holds it
    _series("npu_temperature_celsius", "61x5", npu="2", chip="0"),
    _series("npu_temperature_celsius", "97x5", npu="3", chip="0"),
    _series("npu_pod_info", "1x5", npu="2", chip="0", namespace="infer", pod="svc-7f9c", container="server"),
    _series("npu_pod_info", "1x5", npu="3", chip="0", namespace="train", pod="llm-7b-worker-2",
            container="worker"),
]
HELD_3 = {"npu": "3", "chip": "0", "namespace": "train", "pod": "llm-7b-worker-2", "container": "worker"}


def test_the_documented_joins_name_the_pod_on_each_chip(tmp_path: Path) -> None:
    temperature = documented("npu_temperature_celsius * on (node, npu, chip) group_left (namespace, pod)")
    sick = documented("(npu_healthy == 0) * on (node, npu, chip) group_left (namespace, pod, container)")
    reverse = "npu_pod_info * on (node, npu, chip) group_left npu_temperature_celsius"
    assert reverse in MANUAL
    cases = [
        {"expr": temperature, "eval_time": "2m", "exp_samples": [
            {"labels": _labels(npu="2", chip="0", namespace="infer", pod="svc-7f9c"), "value": 61},
            {"labels": _labels(npu="3", chip="0", namespace="train", pod="llm-7b-worker-2"), "value": 97}]},
        {"expr": sick, "eval_time": "2m", "exp_samples": [
            {"labels": _labels(**HELD_3), "value": 0}]},
        {"expr": reverse, "eval_time": "2m", "exp_samples": [
            {"labels": _labels(npu="2", chip="0", namespace="infer", pod="svc-7f9c", container="server"), "value": 61},
            {"labels": _labels(**HELD_3), "value": 97}]},
    ]
    result = promtool_test(tmp_path, CHIPS, cases)
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_sick_chip_panel_lists_every_pod_on_a_sick_chip_even_a_shared_one(tmp_path: Path) -> None:
    expr = substitute(sick_chip_pods_query(), {"node": "npu-node-07", "npu": ".*"})
    shared = [*CHIPS,
              _series("npu_healthy", "0x5", npu="5", chip="0"),
              _series("npu_pod_info", "1x5", npu="5", chip="0", namespace="infer", pod="a", container="c"),
              _series("npu_pod_info", "1x5", npu="5", chip="0", namespace="infer", pod="b", container="c")]
    cases = [{"expr": expr, "eval_time": "2m", "exp_samples": [
        {"labels": _labels(**HELD_3), "value": 0},
        {"labels": _labels(npu="5", chip="0", namespace="infer", pod="a", container="c"), "value": 0},
        {"labels": _labels(npu="5", chip="0", namespace="infer", pod="b", container="c"), "value": 0}]}]
    result = promtool_test(tmp_path, shared, cases)
    assert result.returncode == 0, result.stdout + result.stderr
