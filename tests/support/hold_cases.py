"""The scrape-gap hold of the shipped alerts, and the promtool cases that pin it (alerts/tests/hold-test.yml).

The rules run in Prometheus 2.42+ and in vmalert 1.79+, which has no ``keep_firing_for``, so an
alert that must outlive a scrape gap says so in its expression, in one canonical form over the
recorded condition ``C`` of the alert (a ``npuwatch:alert_condition:<alert>`` recording rule just
before it, or an already recorded series such as ``hccl:culprit:info``)::

    C
    or
    (
      last_over_time(C[10m])
      unless on (job, instance) min_over_time(up{job="npuwatch"}[10m]) == 1
    )

i.e. the condition now, or its last value of the past 10 minutes while its target missed a
scrape in those 10 minutes (or has no ``up`` at all: gone from service discovery). A target that
answered every scrape gets no hold: its alerts end with their condition.

``python -m tests.support.hold_cases`` rewrites ``alerts/tests/hold-test.yml`` (one case per held
alert rule: two targets with the condition recorded until T, one of which then misses five
scrapes; the gap one fires through the gap and ends 10 minutes after its last true sample, the
other ends with its condition); ``tests/unit/test_alert_rules.py`` fails while it is stale and
while a node-level alert lacks the hold.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from tests.support.golden import report_rewritten, write_if_changed
from tests.support.paths import REPO
from tests.support.rule_files import RULE_FILES, load_yaml

HOLD = "10m"
HOLD_TEST = REPO / "alerts" / "tests" / "hold-test.yml"
CONDITION_PREFIX = "npuwatch:alert_condition:"

_SERIES = r"(?P<series>[a-zA-Z_:][a-zA-Z0-9_:]*(?:\{[^}]*\})?)"
_HOLD_FORM = re.compile(
    rf"^\s*{_SERIES}\s+or\s+\(\s*last_over_time\((?P=series)\[(?P<hold>[0-9]+[smh])\]\)\s+"
    rf"unless on \(job, instance\) min_over_time\(up\{{job=\"npuwatch\"\}}\[(?P=hold)\]\) == 1\s*\)\s*$"
)


def hold_expr(series: str, hold: str = HOLD) -> str:
    """The canonical held expression over the recorded condition ``series``."""
    return (f"{series}\nor\n(\n  last_over_time({series}[{hold}])\n"
            f"  unless on (job, instance) min_over_time(up{{job=\"npuwatch\"}}[{hold}]) == 1\n)\n")


@dataclass(frozen=True)
class HeldAlert:
    file: str
    alert: str
    series: str  # the recorded condition, with its selector
    hold: str
    for_: str
    labels: dict[str, str]  # the selector's labels (those that tell apart same-named rules)

    @property
    def name(self) -> str:
        return self.series.split("{", 1)[0]


def parse_hold(expr: str) -> tuple[str, str] | None:
    """(series, hold) when ``expr`` is the canonical held form, else None."""
    found = _HOLD_FORM.match(expr)
    return (found.group("series"), found.group("hold")) if found else None


def _labels_of(series: str) -> dict[str, str]:
    return dict(re.findall(r'(\w+)="([^"]*)"', series.split("{", 1)[1])) if "{" in series else {}


def held_alerts(files: list[Path] = RULE_FILES) -> list[HeldAlert]:
    found = []
    for path in files:
        for group in load_yaml(path)["groups"]:
            for rule in group["rules"]:
                if "alert" not in rule or (parsed := parse_hold(str(rule["expr"]))) is None:
                    continue
                series, hold = parsed
                found.append(HeldAlert(path.name, rule["alert"], series, hold, str(rule.get("for", "0s")),
                                       _labels_of(series)))
    return found


def conditions(files: list[Path] = RULE_FILES) -> list[tuple[Path, dict[str, Any]]]:
    """Every alert rule with its condition for an ``expr``: a held alert's recorded condition (the record
    just before it), any other alert's own expression; for the tests that read what an alert compares."""
    found = []
    for path in files:
        for group in load_yaml(path)["groups"]:
            records = {(r["record"], tuple(sorted((r.get("labels") or {}).items()))): r
                       for r in group["rules"] if "record" in r}
            for rule in group["rules"]:
                if "alert" not in rule:
                    continue
                parsed = parse_hold(str(rule["expr"]))
                if parsed is not None:
                    record = records.get((parsed[0].split("{", 1)[0], tuple(sorted(_labels_of(parsed[0]).items()))))
                    if record is not None:
                        rule = {**rule, "expr": record["expr"]}
                found.append((path, rule))
    return found


def _minutes(duration: str) -> int:
    units = {"s": 1 / 60, "m": 1, "h": 60}
    return math.ceil(sum(int(n) * units[u] for n, u in re.findall(r"(\d+)([smh])", duration)))


def _selector(labels: dict[str, str]) -> str:
    return ", ".join(f'{k}="{v}"' for k, v in labels.items())


def case(held: HeldAlert) -> dict[str, Any]:
    """Condition recorded 0..T on two targets; ``gap`` misses five scrapes after T, ``steady`` never does."""
    hold = _minutes(held.hold)
    t = _minutes(held.for_) + 2
    extra = "".join(f', {k}="{v}"' for k, v in held.labels.items())
    alerts = f'ALERTS{{alertname="{held.alert}", alertstate="firing"{extra}}}'
    firing = f"count by (instance) (last_over_time({alerts}[1s]))"
    series = []
    for instance, up in (("gap:9101", f"1x{t} 0x5 1x{hold + 10}"), ("steady:9101", f"1x{t + hold + 15}")):
        series.append({"series": f'{held.name}{{job="npuwatch", instance="{instance}"{extra}}}', "values": f"1x{t}"})
        series.append({"series": f'up{{job="npuwatch", instance="{instance}"}}', "values": up})
    both = [{"labels": '{instance="gap:9101"}', "value": 1}, {"labels": '{instance="steady:9101"}', "value": 1}]
    return {
        "name": f"{held.alert}{{{_selector(held.labels)}}} holds through a scrape gap, and only then ({held.file})",
        "interval": "1m",
        "input_series": series,
        "promql_expr_test": [
            # both fire while the condition holds (the series stays visible 5m after its last sample)
            {"expr": firing, "eval_time": f"{t}m", "exp_samples": both},
            # past the lookback: the target that missed scrapes is held, the other one has ended
            {"expr": firing, "eval_time": f"{t + 7}m", "exp_samples": [both[0]]},
            # the hold ends 10m after the last true sample
            {"expr": firing, "eval_time": f"{t + hold + 2}m", "exp_samples": []},
        ],
    }


def document() -> str:
    helds = held_alerts()
    files = sorted({h.file for h in helds})
    data = {
        "rule_files": [f"../{name}" for name in files],
        "evaluation_interval": "1m",
        "tests": [case(h) for h in helds],
    }
    header = ("# Generated by `python -m tests.support.hold_cases` from alerts/*.rules.yml: do not edit.\n"
              "# Every alert held through a scrape gap (the canonical hold in its expression, alerts/README.md\n"
              "# \"Scrape gaps and restarts\") holds on a target that missed scrapes, and only there.\n")
    return header + yaml.safe_dump(data, sort_keys=False, width=1000, allow_unicode=True)


def regenerate() -> list[Path]:
    changed: list[Path] = []
    write_if_changed(HOLD_TEST, document(), changed)
    return changed


if __name__ == "__main__":
    report_rewritten(regenerate())
