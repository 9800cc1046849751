"""The hold of the shipped alerts, and the promtool cases that pin it (alerts/tests/hold-test.yml).

The rules run in Prometheus 2.42+ and in vmalert 1.79+, which has no ``keep_firing_for``, so an
alert that must outlive its condition (a scrape gap, a flap, a counter burst that ends) says so in
its expression, in one canonical form over the recorded condition ``C`` of the alert ``A`` (a
``npuwatch:alert_condition:<alert>`` recording rule just before it, or an already recorded series
such as ``hccl:culprit:info``)::

    C
    or
    (
      last_over_time(C[10m])
      and ignoring (alertname, alertstate, severity)
      ALERTS{alertname="A", alertstate="firing", <the rule's static labels>}
    )

i.e. the condition now, or, while the alert is firing, its last value of the past 10 minutes:
what ``keep_firing_for: 10m`` meant. A pending alert is not held (its ``for:`` starts again), and a
firing one ends 10 minutes after its condition's last true sample, whether the target missed
scrapes or the condition flickered. ``ALERTS`` is the ruler's own series (Prometheus writes it to
its TSDB; vmalert remote-writes it, so vmalert needs ``-remoteWrite.url``).

``python -m tests.support.hold_cases`` rewrites ``alerts/tests/hold-test.yml`` (one case per held
alert rule: a target whose condition held past ``for:`` and then ended is held for 10 minutes and
then ends; one whose condition ended while pending never fires); ``tests/unit/test_alert_rules.py``
fails while it is stale and while a node-level alert lacks the hold.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

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
    rf"and ignoring \(alertname, alertstate, severity\)\s+(?P<gate>ALERTS\{{[^}}]*\}})\s*\)\s*$"
)


class Hold(NamedTuple):
    series: str  # the recorded condition, with its selector
    window: str  # how long a firing alert outlives its condition
    gate: str  # the ALERTS selector of the alert itself: the hold applies only while it fires


def alerts_gate(alert: str, labels: Mapping[str, str]) -> str:
    """The ALERTS selector of the firing rule ``alert`` with static ``labels`` (same-named rules differ in them)."""
    extra = "".join(f', {k}="{v}"' for k, v in sorted(labels.items()))
    return f'ALERTS{{alertname="{alert}", alertstate="firing"{extra}}}'


def hold_expr(series: str, gate: str, hold: str = HOLD) -> str:
    """The canonical held expression over the recorded condition ``series`` of the alert ``gate`` selects."""
    return (f"{series}\nor\n(\n  last_over_time({series}[{hold}])\n"
            f"  and ignoring (alertname, alertstate, severity)\n  {gate}\n)\n")


@dataclass(frozen=True)
class HeldAlert:
    file: str
    alert: str
    series: str  # the recorded condition, with its selector
    hold: str
    for_: str
    labels: dict[str, str]  # the selector's labels (those that tell apart same-named rules)
    gate: str  # the alert's own firing ALERTS selector

    @property
    def name(self) -> str:
        return self.series.split("{", 1)[0]


def parse_hold(expr: str) -> Hold | None:
    """The hold when ``expr`` is the canonical held form, else None."""
    found = _HOLD_FORM.match(expr)
    return Hold(found.group("series"), found.group("hold"), found.group("gate")) if found else None


def _labels_of(series: str) -> dict[str, str]:
    return dict(re.findall(r'(\w+)="([^"]*)"', series.split("{", 1)[1])) if "{" in series else {}


def held_alerts(files: list[Path] = RULE_FILES) -> list[HeldAlert]:
    found = []
    for path in files:
        for group in load_yaml(path)["groups"]:
            for rule in group["rules"]:
                if "alert" not in rule or (parsed := parse_hold(str(rule["expr"]))) is None:
                    continue
                found.append(HeldAlert(path.name, rule["alert"], parsed.series, parsed.window,
                                       str(rule.get("for", "0s")), _labels_of(parsed.series), parsed.gate))
    return found


def conditions(files: list[Path] = RULE_FILES) -> list[tuple[Path, dict[str, Any]]]:
    """Every alert rule with its condition for an ``expr``: a held alert's recorded condition (the record
    just before it, or, for a fleet alert whose condition the shards record, that record in another file
    of ``files``), any other alert's own expression; for the tests that read what an alert compares."""
    def keyed(rules: list[dict[str, Any]]) -> dict[tuple[str, tuple[tuple[str, str], ...]], dict[str, Any]]:
        return {(r["record"], tuple(sorted((r.get("labels") or {}).items()))): r for r in rules if "record" in r}

    groups = [(path, group) for path in files for group in load_yaml(path)["groups"]]
    everywhere = keyed([rule for _, group in groups for rule in group["rules"]])
    found = []
    for path, group in groups:
        records = {**everywhere, **keyed(group["rules"])}
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
    """``held:9101``: the condition holds past ``for:``, drops for two evaluations (a flap, a missed
    scrape), holds again, then ends; the alert fires throughout and ends 10 minutes after the last
    true sample. ``pending:9101`` (alerts with a ``for:`` of 2 minutes or more): the condition ends
    before ``for:``; a pending alert is not held, so it never fires."""
    hold = _minutes(held.hold)
    for_ = _minutes(held.for_)
    t = for_ + 2
    extra = "".join(f', {k}="{v}"' for k, v in held.labels.items())
    firing = f"count by (instance) (last_over_time({held.gate}[1s]))"
    targets = [("held:9101", f"1x{t} stale _ 1x2 stale")]
    if for_ >= 2:
        targets.append(("pending:9101", f"1x{for_ - 2} stale"))
    series = [{"series": f'{held.name}{{job="npuwatch", instance="{instance}"{extra}}}', "values": values}
              for instance, values in targets]
    held_one = [{"labels": '{instance="held:9101"}', "value": 1}]
    last_true = t + 5
    return {
        "name": f"{held.alert}{{{_selector(held.labels)}}} holds while firing, and only then ({held.file})",
        "interval": "1m",
        "input_series": series,
        "promql_expr_test": [
            {"expr": firing, "eval_time": f"{t}m", "exp_samples": held_one},
            # the condition has gone (a stale marker, as a rule writes when its output drops)
            {"expr": firing, "eval_time": f"{t + 2}m", "exp_samples": held_one},
            # past 10 minutes from the first run's end: the second one keeps it
            {"expr": firing, "eval_time": f"{t + hold + 2}m", "exp_samples": held_one},
            # the hold ends 10m after the last true sample
            {"expr": firing, "eval_time": f"{last_true + hold + 2}m", "exp_samples": []},
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
              "# Every held alert (the canonical hold in its expression, alerts/README.md \"Scrape gaps and\n"
              "# restarts\") outlives its condition by the hold while firing, and a pending one is not held.\n")
    return header + yaml.safe_dump(data, sort_keys=False, width=1000, allow_unicode=True)


def regenerate() -> list[Path]:
    changed: list[Path] = []
    write_if_changed(HOLD_TEST, document(), changed)
    return changed


if __name__ == "__main__":
    report_rewritten(regenerate())
