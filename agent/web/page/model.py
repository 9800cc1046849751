"""What the node page shows, gathered on request from the agent's own state.

- the verdict: the agent's latest judgement (``agent.check.live.NodeJudgement``: its ``Verdict`` and findings,
  with each finding's runbook from the fault-kind table);
- each chip's status and cause: the exported ``npu_chip_status`` series (the ``verdict`` job's samples), so the
  page says what ``/metrics`` says;
- each chip's readings: the stored samples of the chip table, the link state and the error codes, marked stale
  when their collector's last run failed and left out once they are older than the collector's max age;
- the collectors' states, as ``/readyz`` reports them; the last hour from ``agent.core.history``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol

from agent.core.history import ChipSeries, NodeHistory
from agent.core.snapshot import SnapshotStore, SourceSnapshot
from agent.health.results import CheckResult
from agent.health.thresholds import FAULT_KINDS
from agent.health.verdict import Verdict, findings, runbook_url
from agent.web.health import collector_state
from collectors.base import Sample

__all__ = ["ChipRow", "FindingRow", "Judgement", "NodeView", "Stale", "build_view"]

VERDICT_SOURCE = "verdict"  # agent.check.live.JOB_NAME: the job whose samples are the exported judgement


class Judgement(Protocol):
    """What the page reads of ``agent.check.live.NodeJudgement``."""

    @property
    def checks(self) -> Sequence[CheckResult]: ...

    @property
    def verdict(self) -> Verdict: ...

    @property
    def at(self) -> float: ...

    @property
    def since(self) -> dict[tuple[str, str, str], float]: ...


@dataclass(frozen=True)
class Stale:
    """Readings served from a collector whose last run failed: how old they are and why."""

    age_s: float
    why: str


@dataclass
class ChipRow:
    npu: int
    chip: int
    status: str = "unknown"  # ok | warn | fail | unknown (npu_chip_status)
    cause: str = ""  # the cause that leads on the chip, as exported
    cause_label: str = ""  # what a person calls it
    temperature: float | None = None
    aicore: float | None = None  # 0..1
    hbm_used: float | None = None  # bytes
    hbm_total: float | None = None
    power: float | None = None  # watts
    link: bool | None = None  # RoCE link up
    codes: list[tuple[str, str]] = field(default_factory=list)  # (error code, handling level)
    findings: list[FindingRow] = field(default_factory=list)
    stale: dict[str, Stale] = field(default_factory=dict)  # source -> why its readings are old
    history: ChipSeries | None = None


@dataclass(frozen=True)
class FindingRow:
    status: str  # fail | warn
    cause: str  # the fault kind, or the check's name
    label: str
    where: str
    detail: str
    npu: int | None
    chip: int | None
    since: float | None
    runbook: str | None


@dataclass
class NodeView:
    node: str
    now: float
    verdict: Verdict | None  # None: not judged yet
    judged_at: float | None
    chips: list[ChipRow]
    findings: list[FindingRow]
    collectors: list[dict[str, object]]
    refresh_s: int


def _labels(sample: Sample) -> dict[str, str]:
    return dict(sample.labels)


def _where(labels: dict[str, str]) -> tuple[int, int] | None:
    npu, chip = labels.get("npu", ""), labels.get("chip", "0") or "0"
    return (int(npu), int(chip)) if npu.isdigit() and chip.isdigit() else None


def _fresh_samples(snap: SourceSnapshot | None, now: float) -> tuple[tuple[Sample, ...], Stale | None]:
    """The samples a collector still serves, and a ``Stale`` mark when its last run failed."""
    if snap is None or not snap.fresh(now):
        return (), None
    if snap.ok or snap.last_success is None:
        return snap.samples, None
    return snap.samples, Stale(max(0.0, now - snap.last_success), snap.error or snap.down_reason or "failed")


def _finding_rows(judgement: Judgement | None) -> list[FindingRow]:
    if judgement is None:
        return []
    rows = []
    for finding in findings(judgement.checks):
        chip = finding.chip if finding.chip is not None else (0 if finding.npu is not None else None)
        key = ("" if finding.npu is None else str(finding.npu), "" if chip is None else str(chip), finding.cause)
        kind = FAULT_KINDS.get(finding.kind) if finding.kind else None
        runbook = runbook_url(kind.runbook_for(finding.check)) if kind is not None else None
        rows.append(FindingRow(finding.status.lower(), finding.cause, finding.label, finding.where, finding.detail,
                               finding.npu, chip, judgement.since.get(key), runbook))
    return rows


def _cause_label(cause: str) -> str:
    kind = FAULT_KINDS.get(cause)
    if kind is not None:
        return kind.label
    return f"{cause} check" if cause else ""


def build_view(store: SnapshotStore, judgement: Judgement | None, history: NodeHistory | None, *, node: str,
               refresh_s: int = 10) -> NodeView:
    now = store.clock()
    rows: dict[tuple[int, int], ChipRow] = {}

    def row(where: tuple[int, int]) -> ChipRow:
        if where not in rows:
            rows[where] = ChipRow(*where)
        return rows[where]

    verdict_samples, _ = _fresh_samples(store.get(VERDICT_SOURCE), now)
    for sample in verdict_samples:
        labels = _labels(sample)
        where = _where(labels)
        if sample.metric == "npu_chip_status" and where is not None:
            chip_row = row(where)
            chip_row.status, chip_row.cause = labels.get("status", "unknown"), labels.get("cause", "")
            chip_row.cause_label = _cause_label(chip_row.cause)
    table, stale = _fresh_samples(store.get("npu_smi_info"), now)
    for sample in table:
        where = _where(_labels(sample))
        if where is None:
            continue
        chip_row = row(where)
        if stale is not None:
            chip_row.stale["npu_smi_info"] = stale
        if sample.metric == "npu_temperature_celsius":
            chip_row.temperature = sample.value
        elif sample.metric == "npu_aicore_utilization_ratio":
            chip_row.aicore = sample.value
        elif sample.metric == "npu_hbm_used_bytes":
            chip_row.hbm_used = sample.value
        elif sample.metric == "npu_hbm_total_bytes":
            chip_row.hbm_total = sample.value
        elif sample.metric == "npu_power_watts":
            chip_row.power = sample.value
    links, stale = _fresh_samples(store.get("hccn_link"), now)
    for sample in links:
        where = _where(_labels(sample))
        if sample.metric == "npu_roce_link_up" and where is not None:
            row(where).link = sample.value == 1.0
            if stale is not None:
                row(where).stale["hccn_link"] = stale
    health, stale = _fresh_samples(store.get("npu_smi_health"), now)
    for sample in health:
        labels = _labels(sample)
        where = _where(labels)
        if sample.metric == "npu_error_code_active" and where is not None:
            row(where).codes.append((labels.get("code", "?"), labels.get("handling", "")))
            if stale is not None:
                row(where).stale["npu_smi_health"] = stale
    finding_rows = _finding_rows(judgement)
    for finding in finding_rows:
        if finding.npu is not None and finding.chip is not None and (finding.npu, finding.chip) in rows:
            rows[(finding.npu, finding.chip)].findings.append(finding)
    for where, chip_row in rows.items():
        chip_row.codes.sort()
        if history is not None:
            chip_row.history = history.series(where[0], where[1], now)
    collectors = [collector_state(snap, now) for snap in sorted(store.all(), key=lambda snap: snap.source)]
    return NodeView(node=node, now=now, verdict=judgement.verdict if judgement is not None else None,
                    judged_at=judgement.at if judgement is not None else None,
                    chips=[rows[where] for where in sorted(rows)], findings=finding_rows, collectors=collectors,
                    refresh_s=refresh_s)
