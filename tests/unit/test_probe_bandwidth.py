"""The copy probes (membw, h2d, p2p) and the sustained GEMM: judging and configuration, in process.

Real workers on the cpu backend: tests/integration/test_probe_bandwidth.py.
"""

from __future__ import annotations

import argparse
import ast
import json
from pathlib import Path
from typing import Any

import pytest

from agent.probes import cli as probe_cli
from agent.probes.bandwidth import bandwidth_measurements, judge_bandwidth
from agent.probes.peaks import BANDWIDTH_KINDS, lookup_bandwidth
from agent.probes.records import ProbeResult, ProbeSettings
from agent.probes.sustained import judge_sustained, sustained_measurement
from tests.support.paths import REPO

PROBES_DIR = REPO / "collectors" / "probes"
G = 1e9


# --------------------------------------------------------------------------- real workers, cpu backend


# --------------------------------------------------------------------------- judging, synthetic results


def p2p_payload(rates: dict[tuple[int, int], float], model: str = "Ascend910B3") -> dict[str, Any]:
    return {"model": model, "pairs": [
        {"src": s, "dst": d, "size_bytes": 256 << 20, "iterations": 10, "seconds": 10 * (256 << 20) / rate,
         "bytes_per_second": rate, "correct": True} for (s, d), rate in rates.items()]}


def judged(probe: str, payload: dict[str, Any], **overrides: Any) -> ProbeResult:
    probe_settings = ProbeSettings(**overrides)
    result = ProbeResult(probe=probe, outcome="pass", started_at=0.0, duration_s=1.0,
                         bandwidth=bandwidth_measurements(probe, payload, probe_settings))
    judge_bandwidth(result, probe_settings)
    return result


def eight_chip_matrix(slow: tuple[int, int] | None = None, slow_rate: float = 12 * G,
                      rate: float = 26.0 * G) -> dict[tuple[int, int], float]:
    rates = {(s, d): rate for s in range(8) for d in range(8) if s != d}
    if slow is not None:
        rates[slow] = slow_rate
    return rates


def test_one_slow_link_of_56_fails_and_is_named() -> None:
    # Averaged over the 56 pairs it would be 25.8 GB/s, 98 % of the expected 26.2 GB/s.
    result = judged("p2p", p2p_payload(eight_chip_matrix(slow=(3, 5))))
    assert result.outcome == "fail"
    assert [(c.device, c.peer) for c in result.bandwidth if c.flagged] == [(3, 5)]
    assert "device 3 -> 5 at 12.00 GB/s, 46% of the expected 26.20 GB/s" in result.message


def test_slow_link_on_an_unknown_model_is_found_against_its_peers() -> None:
    result = judged("p2p", p2p_payload(eight_chip_matrix(slow=(6, 1), slow_rate=18 * G), model="x86_64"))
    assert result.outcome == "fail"
    [cell] = [c for c in result.bandwidth if c.flagged]
    assert (cell.device, cell.peer, cell.expected_bytes_per_second) == (6, 1, None)
    assert cell.peer_ratio == pytest.approx(18 / 26)
    assert "69% of the median 26.00 GB/s of its p2p peers" in result.message


def test_peer_threshold_is_a_boundary_on_both_sides() -> None:
    at_80 = judged("p2p", p2p_payload(eight_chip_matrix(slow=(0, 1), slow_rate=0.80 * 26 * G), model="x"))
    at_70 = judged("p2p", p2p_payload(eight_chip_matrix(slow=(0, 1), slow_rate=0.70 * 26 * G), model="x"))
    assert (at_80.outcome, at_70.outcome) == ("pass", "fail")  # default min_peer_ratio 0.75


def test_healthy_910b3_matrix_passes_and_warns_below_90_percent() -> None:
    healthy = judged("p2p", p2p_payload(eight_chip_matrix(rate=25.5 * G)))
    assert healthy.outcome == "pass" and healthy.warnings == []
    assert healthy.message == "56 cell(s), data intact, 25.50 GB/s to 25.50 GB/s"
    warned = judged("p2p", p2p_payload(eight_chip_matrix(rate=22.5 * G)))  # 86 %, uniform
    assert warned.outcome == "pass"
    assert len(warned.warnings) == 56 and warned.exit_code == 1


def test_datasheet_figures_report_efficiency_but_never_fail() -> None:
    payload = {"measurements": [{"device": 0, "model": "NVIDIA H200", "size_bytes": 1 << 30, "iterations": 20,
                                 "seconds": 1.0, "bytes_per_second": 2.0e12, "correct": True}]}
    result = judged("membw", payload)
    assert result.outcome == "pass"
    [cell] = result.bandwidth
    assert (cell.expected_basis, cell.efficiency) == ("datasheet", pytest.approx(2.0 / 4.8))


def test_membw_910b3_against_the_ascend_dmi_figure() -> None:
    def membw(rate: float) -> ProbeResult:
        return judged("membw", {"measurements": [
            {"device": 0, "model": "Ascend910B3", "size_bytes": 1 << 30, "iterations": 20, "seconds": 1.0,
             "bytes_per_second": rate, "correct": True}]})

    assert membw(1450 * G).outcome == "pass"
    assert membw(1100 * G).outcome == "fail"  # 72 % of 1538 GB/s
    assert "72% of the expected 1538.00 GB/s" in membw(1100 * G).message


def test_h2d_cells_carry_direction_chip_and_pinned() -> None:
    payload = {"measurements": [
        {"device": d, "model": "910B3", "direction": direction, "pinned": True, "size_bytes": 256 << 20,
         "iterations": 10, "seconds": 0.1, "bytes_per_second": rate, "correct": True}
        for d in (0, 1) for direction, rate in (("h2d", 24.0 * G), ("d2h", 23.5 * G))]}
    result = judged("h2d", payload, chip_map={0: (4, 0), 1: (5, 0)})
    assert result.outcome == "pass", result.message
    assert [(c.kind, c.npu, c.pinned) for c in result.bandwidth] == [
        ("h2d", 4, True), ("d2h", 4, True), ("h2d", 5, True), ("d2h", 5, True)]
    assert [c.peer_ratio for c in result.bandwidth] == [1.0, 1.0, 1.0, 1.0]  # compared within its direction


def test_corrupted_cell_fails_before_speed_is_judged() -> None:
    payload = p2p_payload(eight_chip_matrix())
    payload["pairs"][5]["correct"] = False
    result = judged("p2p", payload)
    assert result.outcome == "fail"
    assert result.message == "data corrupted in the copy: device 0 -> 6"


def sustained_result(rates: list[float], clocks: list[float] | None = None, model: str = "x86_64",
                     **overrides: Any) -> ProbeResult:
    windows = [{"index": i, "start_s": 10.0 * i, "seconds": 10.0, "iterations": 100, "flops": rate}
               for i, rate in enumerate(rates)]
    for index, clock in enumerate(clocks or []):
        windows[index].update(clock_hz=clock, power_watts=700.0, temperature_celsius=80.0)
    raw = {"device": 0, "model": model, "dtype": "bf16", "size": 8192, "duration_s": 10.0 * len(rates),
           "window_s": 10.0, "correct": True, "residual_ratio": 0.1, "windows": windows}
    probe_settings = ProbeSettings(**overrides)
    result = ProbeResult(probe="sustained_gemm", outcome="pass", started_at=0.0, duration_s=1.0,
                         sustained=[sustained_measurement(raw, probe_settings)])
    judge_sustained(result, probe_settings)
    return result


def test_sustained_flat_windows_pass() -> None:
    result = sustained_result([780e12, 781e12, 779e12, 780e12])
    assert result.outcome == "pass" and result.warnings == []
    [m] = result.sustained
    assert m.drop_ratio == pytest.approx(1 - 779 / 781)


def test_throttling_fails_and_names_the_window_and_the_clocks() -> None:
    rates = [780e12, 778e12, 760e12, 700e12, 650e12, 600e12]
    clocks = [1.98e9, 1.98e9, 1.90e9, 1.70e9, 1.55e9, 1.41e9]
    result = sustained_result(rates, clocks)
    assert result.outcome == "fail"
    assert "device 0 fell 23%: window 5 at 600.000 TFLOP/s against 780.000" in result.message
    assert "(1.98 GHz, 700 W, 80 °C -> 1.41 GHz, 700 W, 80 °C)" in result.message


def test_small_drop_warns_and_a_slow_first_window_is_not_throttling() -> None:
    warned = sustained_result([780e12, 780e12, 720e12, 730e12])  # 7.7 % down
    assert (warned.outcome, warned.exit_code) == ("pass", 1)
    ramp = sustained_result([500e12, 780e12, 781e12, 780e12])  # the first window still ramping up
    assert ramp.outcome == "pass" and ramp.warnings == []


def test_sustained_efficiency_against_a_measured_peak() -> None:
    result = sustained_result([200e12] * 4, model="910B3")
    assert result.outcome == "fail"
    assert "device 0 bf16 at 64%" in result.message


# --------------------------------------------------------------------------- expected bandwidth table


def test_910b3_bandwidths_are_the_quoted_ascend_dmi_figures() -> None:
    expected = {"membw": 1538 * G, "h2d": 24.8 * G, "d2h": 24.8 * G, "p2p": 26.2 * G}
    for kind in BANDWIDTH_KINDS:
        figure = lookup_bandwidth("Ascend 910B3", kind)
        assert figure is not None and figure.gates and "ascend-dmi" in figure.source
        assert figure.bytes_per_second == pytest.approx(expected[kind])


def test_h200_bandwidths_are_datasheet_figures_and_overrides_win() -> None:
    hbm = lookup_bandwidth("NVIDIA H200", "membw")
    assert hbm is not None and hbm.bytes_per_second == pytest.approx(4.8e12) and not hbm.gates
    mine = lookup_bandwidth("NVIDIA H200", "membw", {"H200": {"membw": 4.3e12}})
    assert mine is not None and mine.gates and mine.bytes_per_second == pytest.approx(4.3e12)
    assert lookup_bandwidth("x86_64", "membw") is None
    assert lookup_bandwidth(None, "p2p") is None


# --------------------------------------------------------------------------- CLI


def parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="npuwatch probe")
    probe_cli.add_arguments(parser)
    return parser.parse_args(list(argv))


RUNNER_NAMES = {"membw": "run_membw", "h2d": "run_h2d", "p2p": "run_p2p", "sustained-gemm": "run_sustained_gemm"}


@pytest.mark.parametrize("probe", sorted(RUNNER_NAMES))
def test_cli_dispatches_the_new_probes(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
                                       probe: str) -> None:
    seen: list[ProbeSettings] = []

    def fake_run(probe_settings: ProbeSettings, **_: object) -> ProbeResult:
        seen.append(probe_settings)
        return ProbeResult(probe=probe.replace("-", "_"), outcome="pass", started_at=0.0, duration_s=0.1)

    monkeypatch.setattr(probe_cli, RUNNER_NAMES[probe], fake_run)
    assert probe_cli.main(parse(probe, "--backend", "cpu", "--bytes", "4MiB", "--duration", "30", "--json")) == 0
    assert json.loads(capsys.readouterr().out)["outcome"] == "pass"
    [used] = seen
    assert (used.copy_bytes, used.allreduce_bytes) == ((4 << 20 if probe != "sustained-gemm" else None), None)
    assert used.sustained_s == 30.0


def test_cli_sustained_gemm_deadline_outlasts_the_duration(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[ProbeSettings] = []
    monkeypatch.setattr(probe_cli, "run_sustained_gemm", lambda s, **_: seen.append(s) or ProbeResult(
        probe="sustained_gemm", outcome="pass", started_at=0.0, duration_s=0.1))
    probe_cli.main(parse("sustained-gemm", "--duration", "600"))
    probe_cli.main(parse("sustained-gemm", "--duration", "600", "--deadline", "50"))
    probe_cli.main(parse("sustained-gemm"))
    assert [s.deadline_s for s in seen] == [720.0, 50.0, 300.0]


def test_cli_rejects_what_the_new_probes_cannot_do(capsys: pytest.CaptureFixture[str]) -> None:
    assert probe_cli.main(parse("sustained-gemm", "--dtypes", "fp16,bf16")) == 3
    assert probe_cli.main(parse("p2p", "--scope", "cluster", "--master", "h:1")) == 3
    assert "one dtype" in capsys.readouterr().err


# --------------------------------------------------------------------------- workers stay Python 3.8


@pytest.mark.parametrize("path", sorted(PROBES_DIR.glob("*.py")), ids=lambda p: p.name)
def test_workers_parse_as_python_3_8(path: Path) -> None:
    tree = ast.parse(path.read_text(encoding="utf-8"), feature_version=(3, 8))
    future = [n for n in tree.body if isinstance(n, ast.ImportFrom) and n.module == "__future__"]
    assert path.name == "__init__.py" or future, "annotations must stay unevaluated on 3.8"
