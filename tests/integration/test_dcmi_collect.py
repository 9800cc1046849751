"""The agent reading chips through the fake libdcmi.so (tests/fixtures/dcmi/fake_dcmi.c): alone (no npu-smi,
no hccn_tool), beside the demo's npu-smi (how many npu-smi processes it still forks), and with a helper
that hangs or crashes (the agent serves on, npu-smi takes over, the helper's trouble is a self-metric).
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest
import yaml

from agent.core import collect
from agent.daemon.assemble import AgentBundle
from tests.support import fake_dcmi as fake
from tests.support.agent_harness import demo_bundle
from tests.support.dcmi_agent import parse_metrics
from tests.support.paths import REPO

FakeLibrary = Callable[[str], Path]


_series = parse_metrics


def _helpers() -> list[psutil.Process]:
    return [p for p in psutil.Process().children(recursive=True) if p.is_running()
            and p.status() != psutil.STATUS_ZOMBIE and "collectors.dcmi.worker" in " ".join(p.cmdline())]


def test_once_with_only_the_library_exports_the_fakes_values(fake_dcmi: FakeLibrary, tmp_path: Path) -> None:
    config = tmp_path / "npuwatch.yml"
    config.write_text(yaml.safe_dump({
        "state_dir": str(tmp_path / "state"),
        "collectors": {"dcmi": {"library": str(fake_dcmi("full")), "lock_file": str(tmp_path / "dcmi.lock")},
                       "hccl_logs": {"enabled": False}},
        "probes": {"enabled": False},
    }))
    bare = tmp_path / "bin"  # a PATH with no npu-smi and no hccn_tool
    bare.mkdir()
    env = {**os.environ, "PATH": str(bare), "FAKE_DCMI_CHIPS": "16", "PYTHONPATH": str(REPO)}
    done = subprocess.run([sys.executable, "-m", "agent", "once", "--config", str(config)], env=env, cwd=tmp_path,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    series = _series(done.stdout)
    assert series["npu_chips"] == 16
    for chip in fake.chip_order(16):
        labels = f'{{chip="0",npu="{chip["card_id"]}"}}'
        logic = chip["logic_id"]
        assert series[f"npu_temperature_celsius{labels}"] == fake.expected_temperature(logic)
        assert series[f"npu_power_watts{labels}"] == fake.expected_power_tenths(logic) / 10
        assert series[f"npu_hbm_total_bytes{labels}"] == fake.expected_hbm(logic)["memory_size"] * 2**20
        assert series[f"npu_aicore_frequency_hertz{labels}"] == fake.expected_frequency(logic, 7) * 1e6
    for collector in ("npu_smi_info", "npu_smi_health", "npu_smi_usages", "npu_smi_common", "npu_smi_ecc",
                      "npu_smi_memory", "hccn_net_health", "dcmi"):
        assert series[f'npuwatch_collector_up{{collector="{collector}"}}'] == 1, collector
    assert series['npuwatch_collector_down_reason{collector="npu_smi_board",reason="no_data"}'] == 1
    assert series["npuwatch_dcmi_helper_up"] == 1
    assert "not found" in done.stderr and "dcmi serves the chip readings" in done.stderr


@pytest.fixture
def tool_runs(monkeypatch: pytest.MonkeyPatch) -> Counter[str]:
    """Tool processes the collection starts, by tool name."""
    counts: Counter[str] = Counter()
    real = collect.run_tool

    def counted(argv: list[str], *args: Any, **kwargs: Any) -> Any:
        counts[Path(argv[0]).name] += 1
        return real(argv, *args, **kwargs)

    monkeypatch.setattr(collect, "run_tool", counted)
    return counts


@pytest.fixture
def with_library(fake_dcmi: FakeLibrary, tmp_path: Path) -> Iterator[Callable[..., AgentBundle]]:
    bundles: list[AgentBundle] = []

    def make(**dcmi: Any) -> AgentBundle:
        bundle = demo_bundle(tmp_path, {"collectors": {"dcmi": {"library": str(fake_dcmi("full")), **dcmi}}})
        bundles.append(bundle)
        return bundle

    yield make
    for bundle in bundles:
        bundle.agent.stop()
    assert not _helpers(), "a DCMI helper outlived the agent"


def test_beside_npu_smi_the_agent_forks_under_one_npu_smi_per_chip_a_minute(
        with_library: Callable[..., AgentBundle], tool_runs: Counter[str]) -> None:
    agent = with_library().agent
    agent.collect_once()
    served = {s.source: s for s in agent.store.all()}
    assert all(served[name].ok for name in ("npu_smi_info", "npu_smi_health", "npu_smi_board"))
    # Per pass, npu-smi ran only for the sources DCMI does not serve, which run every npu_smi_interval.
    slow = [source.name for source in agent.sources if source.group == "npu_smi_slow"]
    assert sorted(slow) == ["npu_smi_board", "npu_smi_hccs", "npu_smi_hccs_bw"]
    chips = len(agent.chips())
    assert tool_runs["npu-smi"] == len(slow) * chips
    per_chip_minute = len(slow) * 60 / agent.config.collectors.dcmi.npu_smi_interval
    assert per_chip_minute <= 1
    assert agent.dcmi is not None and agent.dcmi.last_run["npu_smi_info"] == {"dcmi": 1, "tool": 0}
    # The trust check ran at start against the demo's npu-smi, whose chips are not the fake library's:
    # each source with a field that disagreed is npu-smi's from now on.
    assert agent.trust is not None and agent.trust.verified is True
    assert agent.trust.disagreements
    assert {source for source, _ in agent.trust.disagreements} == set(agent.dcmi.on_tool())


@pytest.mark.parametrize(("fault", "reason"), [("FAKE_DCMI_HANG", "timeout"), ("FAKE_DCMI_CRASH", "died")])
def test_a_hanging_or_crashing_library_leaves_npu_smi_serving(
        with_library: Callable[..., AgentBundle], monkeypatch: pytest.MonkeyPatch, tool_runs: Counter[str],
        fault: str, reason: str) -> None:
    monkeypatch.setenv(fault, "dcmiv2_get_device_health")
    agent = with_library(call_timeout="2s").agent  # the helper answers for a hang at 1.4 s
    agent.collect_once()
    snaps = {s.source: s for s in agent.store.all()}
    for name in ("npu_smi_info", "npu_smi_health"):
        assert snaps[name].ok, (name, snaps[name].error)
    assert agent.dcmi is not None
    assert agent.dcmi.last_run["npu_smi_info"] == {"dcmi": 0, "tool": 1}
    assert agent.dcmi.client.errors[reason] >= 1
    body = _series(agent.cache.render().body.decode())
    # a call that hangs costs that reading (the helper answers for it and runs on); a crash, the helper
    assert body["npuwatch_dcmi_helper_up"] == (1 if reason == "timeout" else 0)
    assert body[f'npuwatch_dcmi_call_errors_total{{kind="{reason}"}}'] >= 1
    assert body['npuwatch_collector_up{collector="dcmi"}'] == 1  # the helper warns, the collectors stay up
    assert body['npuwatch_collector_up{collector="npu_smi_info"}'] == 1
    # readings that do not touch the fault still come through DCMI
    assert agent.dcmi.last_run["npu_smi_usages"]["dcmi"] + agent.dcmi.last_run["npu_smi_usages"]["tool"] == 8


def test_npuwatch_dcmi_prints_the_side_by_side_table(fake_dcmi: FakeLibrary, tmp_path: Path) -> None:
    def run(dcmi: dict[str, Any]) -> subprocess.CompletedProcess[str]:
        config = tmp_path / "npuwatch.yml"
        config.write_text(yaml.safe_dump({"collectors": {"dcmi": {**dcmi, "lock_file": str(tmp_path / "lock")}}}))
        env = {**os.environ, "PATH": str(tmp_path), "PYTHONPATH": str(REPO)}
        return subprocess.run([sys.executable, "-m", "agent", "dcmi", "--config", str(config)], env=env,
                              capture_output=True, text=True, timeout=60)

    alone = run({"library": str(fake_dcmi("full"))})
    assert alone.returncode == 3, alone.stderr  # no npu-smi to compare with
    assert "npu 0 chip 0 (logic id 3):" in alone.stdout
    power = next(line.split() for line in alone.stdout.splitlines() if line.startswith("npu_smi_info    power"))
    assert power[2:] == [str(fake.expected_power_tenths(3) // 10), "-", "?"]
    off = run({"enabled": False})
    assert off.returncode == 2 and off.stdout == "npuwatch dcmi: no DCMI here: collectors.dcmi.enabled is false\n"
    gone = run({"library": str(tmp_path / "nowhere" / "libdcmi.so")})  # why, without -v: no log line shows it
    assert gone.returncode == 2 and "no DCMI here: " in gone.stdout and "nowhere" in gone.stdout, gone.stdout
    assert "log lines above" not in gone.stdout
