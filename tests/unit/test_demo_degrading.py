"""The demo's degrading faults (optics_degrading, hbm_sbe_rising) as the render model computes them, and the
Python PromQL helpers the predictive-alert integration test judges them with."""

from __future__ import annotations

import math

import pytest

from agent.demo import render_model as rm
from agent.demo.faults import check_params
from agent.demo.state import DemoState
from tests.support import promql_eval as pe

T0 = 1_750_000_000.0


def _state(**faults: dict[str, float]) -> DemoState:
    chip_faults = {"0": {name: {"since": T0, **params} for name, params in faults.items()}}
    return DemoState(chips=1, created_at=T0 - 86_400, chip_faults=chip_faults)


def _dbm(milliwatts: float) -> float:
    return 10 * math.log10(milliwatts)


def test_optics_degrading_fades_in_a_straight_line_in_dbm_then_goes_dark() -> None:
    healthy = rm.optical_reading(DemoState(chips=1), 0, T0)
    state = _state(optics_degrading={"duration_s": 3600.0})
    for lane in range(4):
        start = rm.optical_reading(state, 0, T0)[f"rx{lane}"]
        half = rm.optical_reading(state, 0, T0 + 1800)[f"rx{lane}"]
        end = rm.optical_reading(state, 0, T0 + 3599.999)[f"rx{lane}"]
        assert start == pytest.approx(healthy[f"rx{lane}"])
        assert _dbm(half) == pytest.approx((_dbm(start) + _dbm(0.01)) / 2)  # half way in dB
        later = rm.optical_reading(state, 0, T0 + 0.6 * 3600)[f"rx{lane}"]
        assert later < 0.1 < start  # under NPUOpticalModuleDegraded's 0.1 mW a little after half way
        assert end == pytest.approx(0.01, rel=1e-3)
    assert rm.link_is_up(state, 0, T0 + 3599) and not rm.optics_dark(state, 0, T0 + 3599)
    assert not rm.link_is_up(state, 0, T0 + 3600) and rm.optics_dark(state, 0, T0 + 3600)
    assert rm.optical_reading(state, 0, T0 + 3600)["rx0"] < 0.0003


def test_optics_degrading_counts_roce_errors_faster_and_faster() -> None:
    state = _state(optics_degrading={"duration_s": 3600.0})
    errors = [rm.roce_counters(state, 0, T0 + minute * 60)["mac_rx_fcs_err_pkt_num"] for minute in range(0, 80, 10)]
    steps = [b - a for a, b in zip(errors, errors[1:])]
    assert errors[0] == 0 and all(b > a for a, b in zip(steps, steps[1:])), errors
    # once dark (after 60 min), the no-light rate: 40 errors/s, half of them FCS errors
    assert steps[-1] == pytest.approx(0.5 * 40 * 600, rel=0.01)


def test_hbm_sbe_rising_ramps_its_rate_then_holds_it() -> None:
    params = check_params("hbm_sbe_rising", {})
    assert params == {} and rm.episode_counts("hbm_sbe_rising", {"since": T0}, T0 + 7200) == {"hbm_sbe": 30 // 2 * 2}
    state = _state(hbm_sbe_rising={"per_h": 30.0, "ramp_s": 7200.0})
    count = [rm.ecc_counts(state, 0, T0 + hour * 3600)[2] for hour in (0, 1, 2, 3, 4)]
    assert count == [0, 7, 30, 60, 90]  # 30 * h^2 / 4 during the ramp, then 30 an hour


def test_promql_rate_and_increase_extrapolate_as_prometheus_does() -> None:
    samples = [(float(t), 100.0 + 2.0 * t) for t in range(0, 3601, 60)]
    assert pe.rate(samples, 3600, 600) == pytest.approx(2.0)
    assert pe.increase(samples, 3600, 3600) == pytest.approx(7200.0)
    # a window half filled: the increase there, spread over the whole window
    young = [(float(t), 2.0 * t) for t in range(0, 301, 60)]
    assert pe.rate(young, 300, 600) == pytest.approx(1.0)  # never extrapolated before the counter was 0
    assert pe.rate(samples[:1], 0, 600) is None
    assert pe.increase([(0.0, 5.0), (60.0, 7.0), (120.0, 1.0)], 120, 120) == pytest.approx(3.0)  # +2, reset, +1


def test_promql_predict_linear_subquery_and_for() -> None:
    line = [(float(t), 10.0 - 0.01 * t) for t in range(0, 601, 60)]
    assert pe.predict_linear(line, 600, 1000) == pytest.approx(10.0 - 0.01 * 1600)
    assert pe.predict_linear(line[:1], 0, 10) is None
    assert [t for t, _ in pe.subquery(lambda t: t, 1000.0, 600.0, 300.0)] == [600.0, 900.0]
    assert pe.instant(line, 900) == line[-1][1] and pe.instant(line, 901) is None
    times = [float(t) for t in range(0, 600, 60)]
    assert pe.first_firing(lambda t: t >= 120, times, 180) == 300
    assert pe.first_firing(lambda t: t not in (240.0,), times, 180) == 180
    assert pe.first_firing(lambda t: t in (60.0, 120.0), times, 180) is None
