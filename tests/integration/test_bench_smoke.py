"""Smoke test of the benchmark scripts: each runs with --quick and prints its table.

The three scripts run concurrently (most of their quick time is waiting on child processes), so
the module stays well under 30 s. Only the shape and sanity of the output are asserted here; the
speed and memory targets themselves are what the scripts report, not test assertions.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import time

import pytest

from tests.support.bench_tables import judged_right, number, row, table_rows
from tests.support.paths import REPO

ROOT = REPO
SCRIPTS = ("agent", "metrics_latency", "soak", "tool_cost")
sys.path.insert(0, str(ROOT))

from bench.metrics_latency import find_node_exporter  # noqa: E402


@pytest.fixture(scope="module")
def outputs() -> dict[str, tuple[int, str, str]]:
    procs = {
        name: subprocess.Popen([sys.executable, str(ROOT / "bench" / f"{name}.py"), "--quick"], cwd=ROOT,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for name in SCRIPTS
    }
    results: dict[str, tuple[int, str, str]] = {}
    deadline = time.monotonic() + 180  # a loaded 2-core machine; each script alone takes seconds
    for name, proc in procs.items():
        try:
            stdout, stderr = proc.communicate(timeout=max(1.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            proc.kill()
            stdout, stderr = proc.communicate()
            results[name] = (-1, stdout, stderr)
            continue
        results[name] = (proc.returncode, stdout, stderr)
    return results


def test_every_ok_column_is_the_comparison_of_value_and_target(outputs: dict[str, tuple[int, str, str]]) -> None:
    for name, (code, stdout, _) in outputs.items():
        assert code == 0, name
        for cells in table_rows(stdout).values():
            assert judged_right(cells), (name, cells)


def test_agent_bench_table(outputs: dict[str, tuple[int, str, str]]) -> None:
    code, stdout, stderr = outputs["agent"]
    assert code == 0, stderr[-2000:]
    rows = table_rows(stdout)
    # Deterministic targets must be met; timing targets are the benchmark's to report, not a test's.
    assert row(rows, "series, 16 chips")[3] == "yes"
    for prefix in ("scrape p50", "render p50", "render p99", "RSS at cycle 2 ", "RSS growth"):
        assert number(row(rows, prefix)[1]) >= 0
    p99 = row(rows, "scrape p99")
    assert p99[2] == "< 5 ms" and number(p99[1]) > 0
    assert row(rows, "series, 16 chips")[2] == "<= 1660"
    assert number(row(rows, "series, 16 chips")[1]) > 500  # a 16-chip node exports hundreds of series
    assert row(rows, "RSS at cycle 20 ")[2] == "< 60 MB"
    # the defaults sample the fail-slow signals (issue 43: < 40 CPU-s/h with them on)
    assert row(rows, "agent CPU-s/h, 1 chips, npu-smi, fail-slow sampling")[2] == "< 40"
    assert number(row(rows, "agent CPU-s/h, 1 chips")[1]) > 0
    if shutil.which("cc") or shutil.which("gcc"):  # the fake libdcmi.so is compiled: the DCMI mode ran too
        own = row(rows, "agent + helper CPU-s/h, 1 chips, DCMI, fail-slow sampling")
        assert own[2] == "< 40" and number(own[1]) >= number(row(rows, "agent CPU-s/h, 1 chips, DCMI")[1]) > 0
    # the counting shims saw the real agent start tool processes
    assert number(row(rows, "tool processes/min, 1 chips")[1]) > 0
    assert number(row(rows, "agent process RSS, 1 chips")[1]) > 10

def test_metrics_latency_bench_table(outputs: dict[str, tuple[int, str, str]]) -> None:
    code, stdout, stderr = outputs["metrics_latency"]
    assert code == 0, stderr[-2000:]
    rows = table_rows(stdout)
    for variant in ("cached", "render per scrape, typical", "render per scrape, every source changed"):
        assert number(row(rows, f"npuwatch 16 chips, {variant} p50")[1]) > 0
        assert number(row(rows, f"npuwatch 16 chips, {variant} series")[1]) > 500
    if find_node_exporter(None) is None:
        assert "node_exporter not found" in stdout
    else:
        assert number(row(rows, "node_exporter series")[1]) > 0
        assert row(rows, "p50 ratio: npuwatch 16 chips, cached / node_exporter")[2] == "<= 1.00"

def test_soak_bench_table(outputs: dict[str, tuple[int, str, str]]) -> None:
    code, stdout, stderr = outputs["soak"]
    assert code == 0, stderr[-2000:]
    rows = table_rows(stdout)
    for cycle in (3, 15, 30):
        assert number(row(rows, f"RSS at cycle {cycle}")[1]) > 10
    assert row(rows, "RSS growth, cycle 3 -> 30")[2] == "< 5 MB"


def test_tool_cost_bench_table(outputs: dict[str, tuple[int, str, str]]) -> None:
    code, stdout, stderr = outputs["tool_cost"]
    assert code == 0, stderr[-2000:]
    rows = table_rows(stdout)
    assert row(rows, "dcmi path, 2 chips: npu-smi processes/chip/min")[2] == "<= 1"
    assert row(rows, "npu-smi path, 2 chips: data age p99 / interval")[2] == "<= 2"
    # the costly fakes counted the real agent's tool processes; the DCMI path's helper answered calls
    assert number(row(rows, "npu-smi path, 2 chips: tool processes/min")[1]) > 0
    assert number(row(rows, "dcmi path, 2 chips: DCMI library calls/min")[1]) > 0
    assert number(row(rows, "npu-smi path, 2 chips: agent + helper CPU-s/h")[1]) > 0


def test_the_fleet_rules_bench_gives_the_fleet_tier_a_core_of_its_own() -> None:
    """bench/fleet_rules.py: the fleet tier's processes run on CPUs the per-node tier's do not, a child inherits
    the CPUs it was started on, and the bench's own CPUs come back afterwards."""
    import os
    import subprocess

    from bench.fleet_rules import on_cpus, placement

    mine = frozenset(os.sched_getaffinity(0))
    apart, shared = placement(shared=False), placement(shared=True)
    assert shared.shared and shared.node == mine
    if len(mine) >= 2:
        assert apart.node.isdisjoint(apart.fleet) and apart.node | apart.fleet == mine and len(apart.fleet) == 1
        assert "fleet tier on CPU" in apart.describe()
    else:
        assert apart.shared
    with on_cpus(apart.fleet):
        child = subprocess.run([sys.executable, "-c", "import os; print(sorted(os.sched_getaffinity(0)))"],
                               capture_output=True, text=True, timeout=60, check=True)
    assert child.stdout.strip() == str(sorted(apart.fleet))
    assert frozenset(os.sched_getaffinity(0)) == mine
