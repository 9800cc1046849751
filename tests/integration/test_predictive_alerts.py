"""The predictive alerts page before the threshold alerts they anticipate, on the demo's degrading faults.

A one-chip demo node runs an hour healthy, then ``optics_degrading`` and ``hbm_sbe_rising`` (their
defaults) on its chip, on a frozen clock stepped by one scrape interval at a time; the real agent
collects (the fakes, the parsers, its verdict, the exposition) at every step. Its series are then judged twice
(a threshold alert that pages an agent's finding, NPUOpticalModuleDegraded or NPURoCELinkDown, reads the exported
finding):

- in Python (tests.support.promql_eval), with the windows, horizons, thresholds and ``for:`` read
  from the shipped rules, which gives the minute each alert first fires;
- by promtool, whose rule engine is Prometheus's, on the same series and the shipped rule files:
  at the minute Python found, the predictive alert fires and its threshold alert does not; a
  minute earlier, the predictive alert does not fire yet; at the end of the healthy hour nothing
  of it is even pending.

The 60x time-scaled fleet e2e cannot show this: it scales every window and ``for:`` but not the
``predict_linear`` horizon (a number in the expression).
"""

from __future__ import annotations

import re
import subprocess
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from agent.health.thresholds import WEAK_RX_POWER_W
from agent.health.verdict_metrics import FAULT_METRIC
from tests.support import hold_cases
from tests.support import promql_eval as pe
from tests.support.agent_harness import demo_bundle
from tests.support.paths import REPO

T0 = 1_750_003_200.0  # a multiple of an hour: subquery steps fall on whole minutes of the test
SCRAPE_S = 120.0
HEALTHY_S = 3600.0
FAULTY_S = 96 * 60.0  # past the last threshold alert (NPUHBMSingleBitECCRate, ~88 min in)
EVAL_S = 60.0  # evaluation_interval of the promtool check
LABELS = {"job": "npuwatch", "instance": "10.0.0.1:9101", "node": "node-a"}
SOURCES_OFF = {
    "npu_smi": ["npu_smi_usages", "npu_smi_common", "npu_smi_health", "npu_smi_memory", "npu_smi_board",
                "npu_smi_hccs", "npu_smi_hccs_bw"],
    "hccn_tool": ["hccn_link_stat", "hccn_net_health", "hccn_speed", "hccn_ip"],
}
WATCHED = ("npu_optical_rx_power_watts", "npu_optical_signal_lost", "npu_roce_link_up", "npu_roce_errors_total",
           "npu_hbm_ecc_errors_total", FAULT_METRIC)

Series = dict[tuple[str, tuple[tuple[str, str], ...]], list[tuple[float, float]]]


# ----------------------------------------------------------------------------- the shipped rules

def _seconds(text: str) -> float:
    parts = re.findall(r"(\d+)([smh])", text)
    assert "".join(n + u for n, u in parts) == text, text
    return float(sum(int(n) * {"s": 1, "m": 60, "h": 3600}[u] for n, u in parts))


def _number(text: str) -> float:
    value = 1.0
    for factor in text.split("*"):
        value *= float(factor)
    return value


def _rule(name: str, **labels: str) -> dict[str, Any]:
    # a held alert's expr is its recorded condition (alerts/README.md, "Scrape gaps and restarts")
    found = [rule for _, rule in hold_cases.conditions()
             if rule["alert"] == name and all(rule["labels"].get(k) == v for k, v in labels.items())]
    assert len(found) == 1, (name, labels, len(found))
    return found[0]


def _grab(pattern: str, expr: str) -> tuple[str, ...]:
    match = re.search(pattern, " ".join(expr.split()))
    assert match is not None, f"the rule no longer reads as this test expects ({pattern}):\n{expr}"
    return match.groups()


# ----------------------------------------------------------------------------- the demo run

@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Series:
    """Every watched series of chip 0, one sample per scrape, over the healthy hour and the faults."""
    extra = {"collectors": {"npu_smi": {"disable": SOURCES_OFF["npu_smi"]},
                            "hccn_tool": {"disable": SOURCES_OFF["hccn_tool"]}, "host": {"enabled": False}}}
    bundle = demo_bundle(tmp_path_factory.mktemp("predictive"), extra, chips=1)
    demo = bundle.demo
    assert demo is not None
    series: Series = {}
    try:
        steps = int((HEALTHY_S + FAULTY_S) / SCRAPE_S)
        for step in range(steps + 1):
            now = T0 + step * SCRAPE_S
            demo.freeze_time(now)
            if now == T0 + HEALTHY_S:
                demo.set_fault("optics_degrading", chip=0, since=now)
                demo.set_fault("hbm_sbe_rising", chip=0, since=now)
            bundle.agent.collect_once()
            for family in text_string_to_metric_families(bundle.agent.cache.render().body.decode()):
                for sample in family.samples:
                    if sample.name in WATCHED:
                        key = (sample.name, tuple(sorted(sample.labels.items())))
                        series.setdefault(key, []).append((now, sample.value))
    finally:
        bundle.agent.stop()
    return series


def _one(series: Series, name: str, **labels: str) -> list[tuple[float, float]]:
    found = [values for (metric, pairs), values in series.items()
             if metric == name and all(dict(pairs).get(k) == v for k, v in labels.items())]
    assert len(found) == 1, (name, labels, len(found))
    return found[0]


def _finding(series: Series, kind: str) -> Callable[[float], bool]:
    """Whether the agent's finding ``kind`` is exported at a time (what its generated alert reads)."""
    found = [values for (metric, pairs), values in series.items()
             if metric == FAULT_METRIC and dict(pairs).get("kind") == kind]
    return lambda t: any(pe.instant(values, t) is not None for values in found)


def _evaluations() -> list[float]:
    return [T0 + i * EVAL_S for i in range(int((HEALTHY_S + FAULTY_S) / EVAL_S) + 1)]


@dataclass(frozen=True)
class Page:
    alert: str
    labels: dict[str, str]  # the series' labels, for promtool's ALERTS query
    condition: Callable[[float], bool]
    for_s: float

    def first(self) -> float | None:
        return pe.first_firing(self.condition, _evaluations(), self.for_s)


def _optics(series: Series) -> tuple[Page, Page]:
    rule = _rule("NPUOpticalRxPowerFalling")
    window, horizon, level, guard, average = _grab(
        r"predict_linear\(npu_optical_rx_power_watts\{[^}]*\}\[(\w+)\], ([\d *]+)\) < ([\d.e-]+) and "
        r"npu_optical_rx_power_watts\{[^}]*\} >= ([\d.e-]+) and "
        r"npu_optical_rx_power_watts\{[^}]*\} < avg_over_time\(npu_optical_rx_power_watts\{[^}]*\}\[(\w+)\]\)$",
        rule["expr"])
    rx = _one(series, "npu_optical_rx_power_watts", lane="0")

    def falling(t: float) -> bool:
        forecast = pe.predict_linear(pe.window(rx, t, _seconds(window)), t, _number(horizon))
        now = pe.instant(rx, t)
        recent = [value for _, value in pe.window(rx, t, _seconds(average))]
        return (forecast is not None and now is not None and forecast < float(level) and now >= float(guard)
                and bool(recent) and now < sum(recent) / len(recent))

    assert float(level) == float(guard) == WEAK_RX_POWER_W, "the forecast aims at the weak-light bound"
    # the threshold alert: the agent's optics_weak finding (the lane under its module's own rx-low threshold)
    hard = _rule("NPUOpticalModuleDegraded", kind="optics_weak")
    return (Page("NPUOpticalRxPowerFalling", {"lane": "0"}, falling, _seconds(rule["for"])),
            Page("NPUOpticalModuleDegraded", {"kind": "optics_weak"}, _finding(series, "optics_weak"),
                 _seconds(hard["for"])))


def _roce(series: Series) -> tuple[Page, Page]:
    rule = _rule("NPURoCEErrorsRising")
    counters, window, sub_range, sub_step, horizon, level, quiet = _grab(
        r'predict_linear\(rate\(npu_roce_errors_total\{[^}]*counter=~"([^"]+)"\}\[(\w+)\]\)\[(\w+):(\w+)\], '
        r"([\d *]+)\) > ([\d.]+) unless rate\(npu_roce_errors_total\{[^}]*\}\[(\w+)\]\) == 0 unless on",
        rule["expr"])
    assert "mac_rx_fcs_err_pkt_num" in counters.split("|")
    errors = _one(series, "npu_roce_errors_total", counter="mac_rx_fcs_err_pkt_num")
    up = _one(series, "npu_roce_link_up")

    def rising(t: float) -> bool:
        points = pe.subquery(lambda u: pe.rate(errors, u, _seconds(window)), t, _seconds(sub_range), _seconds(sub_step))
        forecast = pe.predict_linear(points, t, _number(horizon))
        recent = pe.rate(errors, t, _seconds(quiet))
        return (forecast is not None and forecast > float(level) and recent not in (None, 0.0)
                and pe.instant(up, t) != 0)

    down = _rule("NPURoCELinkDown")
    return (Page("NPURoCEErrorsRising", {"counter": "mac_rx_fcs_err_pkt_num"}, rising, _seconds(rule["for"])),
            Page("NPURoCELinkDown", {}, _finding(series, "link_down"), _seconds(down["for"])))


def _ecc(series: Series) -> tuple[Page, Page]:
    rule = _rule("NPUHBMSingleBitECCRising")
    window, sub_range, sub_step, horizon, level, last, crossed, quiet = _grab(
        r"predict_linear\(rate\(npu_hbm_ecc_errors_total\{[^}]*\}\[(\w+)\]\)\[(\w+):(\w+)\], ([\d *]+)\) \* 3600 > "
        r"([\d.]+) and increase\(npu_hbm_ecc_errors_total\{[^}]*\}\[(\w+)\]\) <= ([\d.]+) unless "
        r"rate\(npu_hbm_ecc_errors_total\{[^}]*\}\[(\w+)\]\) == 0$", rule["expr"])
    hard = _rule("NPUHBMSingleBitECCRate")
    hard_window, hard_level = _grab(r"increase\(npu_hbm_ecc_errors_total\{[^}]*\}\[(\w+)\]\) > ([\d.]+)$", hard["expr"])
    assert (last, float(crossed), float(level)) == (hard_window, float(hard_level), float(hard_level))
    sbe = _one(series, "npu_hbm_ecc_errors_total", bit="single")

    def rising(t: float) -> bool:
        points = pe.subquery(lambda u: pe.rate(sbe, u, _seconds(window)), t, _seconds(sub_range), _seconds(sub_step))
        forecast = pe.predict_linear(points, t, _number(horizon))
        hour = pe.increase(sbe, t, _seconds(last))
        recent = pe.rate(sbe, t, _seconds(quiet))
        return (forecast is not None and forecast * 3600 > float(level) and hour is not None
                and hour <= float(crossed) and recent not in (None, 0.0))

    def over(t: float) -> bool:
        hour = pe.increase(sbe, t, _seconds(hard_window))
        return hour is not None and hour > float(hard_level)

    return (Page("NPUHBMSingleBitECCRising", {"bit": "single"}, rising, _seconds(rule["for"])),
            Page("NPUHBMSingleBitECCRate", {"bit": "single"}, over, _seconds(hard["for"])))


PAIRS = {"optics": _optics, "roce": _roce, "ecc": _ecc}


# ----------------------------------------------------------------------------- promtool

def _promtool_file(series: Series, checks: list[dict[str, Any]], path: Path) -> Path:
    inputs = []
    for (name, pairs), samples in sorted(series.items()):
        values = {round((t - T0) / SCRAPE_S): v for t, v in samples}
        text = " ".join(repr(values[i]) if i in values else "_" for i in range(max(values) + 1))
        labels = ", ".join(f'{k}="{v}"' for k, v in sorted({**LABELS, **dict(pairs)}.items()))
        inputs.append({"series": f"{name}{{{labels}}}", "values": text})
    # the agent answered every scrape: no scrape-gap hold (alerts/README.md, "Scrape gaps and restarts")
    steps = max(round((t - T0) / SCRAPE_S) for samples in series.values() for t, _ in samples)
    up_labels = ", ".join(f'{k}="{v}"' for k, v in sorted(LABELS.items()))
    inputs.append({"series": f"up{{{up_labels}}}", "values": f"1x{steps}"})
    document = {
        "rule_files": [str(p) for p in sorted((REPO / "alerts").glob("*.rules.yml"))],
        "evaluation_interval": f"{int(EVAL_S)}s",
        "tests": [{"interval": f"{int(SCRAPE_S)}s", "input_series": inputs, "promql_expr_test": checks}],
    }
    path.write_text(yaml.safe_dump(document, sort_keys=False), encoding="utf-8")
    return path


def _count(page: Page, at: float, expected: int, state: str = "firing") -> dict[str, Any]:
    matchers = ", ".join(f'{k}="{v}"' for k, v in {"alertname": page.alert, **page.labels}.items())
    state_matcher = f', alertstate="{state}"' if state else ""
    return {"expr": f"count(ALERTS{{{matchers}{state_matcher}}}) or vector(0)",
            "eval_time": f"{int((at - T0) / EVAL_S)}m", "exp_samples": [{"labels": "{}", "value": expected}]}


def _pages(run: Series) -> Iterator[tuple[str, Page, Page, float, float]]:
    for name, make in PAIRS.items():
        predictive, hard = make(run)
        early, late = predictive.first(), hard.first()
        assert early is not None, f"{predictive.alert} never fires on the degrading demo fault"
        assert late is not None, f"{hard.alert} never fires on the degrading demo fault (run longer?)"
        yield name, predictive, hard, early, late


# ----------------------------------------------------------------------------- tests

def test_predictive_alerts_fire_before_their_threshold_alerts(run: Series, promtool: str, tmp_path: Path) -> None:
    fault_at = T0 + HEALTHY_S
    checks: list[dict[str, Any]] = []
    leads = []
    for name, predictive, hard, early, late in _pages(run):
        healthy = [t for t in _evaluations() if t <= fault_at and predictive.condition(t)]
        assert not healthy, f"{predictive.alert} holds on the healthy node at {[(t - T0) / 60 for t in healthy]} min"
        assert early < late, (f"{predictive.alert} first fires {(early - fault_at) / 60:.0f} min into the fault, "
                              f"not before {hard.alert} ({(late - fault_at) / 60:.0f} min)")
        leads.append(f"{name}: {predictive.alert} at {(early - fault_at) / 60:.0f} min, {hard.alert} at "
                     f"{(late - fault_at) / 60:.0f} min ({(late - early) / 60:.0f} min earlier)")
        checks += [
            _count(predictive, fault_at, 0, state=""),  # not even pending on the healthy hour
            _count(predictive, early - EVAL_S, 0),
            _count(predictive, early, 1),
            _count(hard, early, 0),
            _count(hard, late - EVAL_S, 0),
            _count(hard, late, 1),
        ]
    print("\n" + "\n".join(leads))
    path = _promtool_file(run, checks, tmp_path / "predictive-test.yml")
    result = subprocess.run([promtool, "test", "rules", str(path)], capture_output=True, text=True, timeout=120,
                            check=False)
    assert result.returncode == 0, (result.stdout + result.stderr)[-4000:]


def test_the_degrading_optics_fault_ends_in_loss_of_signal_after_the_predictive_pages(run: Series) -> None:
    """The demo's story in order: the link holds while the light fades (the RoCE alert needs it up),
    and goes down with LOS once ``duration_s`` (3600 s by default) has passed."""
    fault_at = T0 + HEALTHY_S
    up = _one(run, "npu_roce_link_up")
    lost = _one(run, "npu_optical_signal_lost")
    assert all(v == 1 for t, v in up if t < fault_at + 3600) and all(v == 0 for t, v in up if t >= fault_at + 3600)
    assert all(v == 0 for t, v in lost if t < fault_at + 3600) and all(v == 1 for t, v in lost if t >= fault_at + 3600)
    for _, predictive, _hard, early, _late in _pages(run):
        if predictive.alert != "NPUHBMSingleBitECCRising":
            assert early < fault_at + 3600, f"{predictive.alert} fires only after the light is gone"
