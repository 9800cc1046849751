"""The node's judgement as series: one per active finding, one status per chip, one node verdict."""

from __future__ import annotations

from agent.health.results import CheckResult, Result
from agent.health.status import FAIL, PASS, UNKNOWN, WARN
from agent.health.verdict import lead
from agent.health.verdict_metrics import FAULT_METRIC, finding_keys, verdict_samples
from collectors.base import ChipRef

CHIPS = [ChipRef(npu, 0) for npu in range(4)]


def _checks() -> list[CheckResult]:
    return [
        CheckResult("temperature", FAIL, "", (
            Result(WARN, "NPU 0: 90 C", npu=0, chip=0, kind="chip_hot"),
            Result(FAIL, "NPU 1: 97 C", npu=1, chip=0, kind="chip_too_hot"),
            Result(PASS, "NPU 2: 60 C", npu=2, chip=0))),
        CheckResult("roce_link", FAIL, "", (
            Result(FAIL, "NPU 1: hccn_tool -i 1 -link -g says DOWN", npu=1, chip=0, kind="link_down", at=123.0),)),
        CheckResult("hbm_ecc", UNKNOWN, "", (Result(UNKNOWN, "NPU 3: not read", npu=3, chip=0),)),
        CheckResult("chip_count", FAIL, "", (Result(FAIL, "npu-smi lists 4 of 5 expected chips",
                                                    kind="chip_missing"),)),
    ]


def _by_metric(checks: list[CheckResult], since: dict[tuple[str, str, str], float]) -> dict[str, list[dict[str, str]]]:
    out: dict[str, list[dict[str, str]]] = {}
    for sample in verdict_samples(checks, lead(checks), CHIPS, since):
        out.setdefault(sample.metric, []).append({**dict(sample.labels), "value": str(sample.value)})
    return out


def test_every_finding_once_with_its_start() -> None:
    checks = _checks()
    keys = finding_keys(checks)
    assert keys == {("1", "0", "link_down"): 123.0, ("1", "0", "chip_too_hot"): None, ("", "", "chip_missing"): None,
                    ("0", "0", "chip_hot"): None}
    since = {key: at if at is not None else 500.0 for key, at in keys.items()}
    faults = _by_metric(checks, since)[FAULT_METRIC]
    assert {(f["npu"], f["kind"], f["status"], f["value"]) for f in faults} == {
        ("1", "link_down", "fail", "123.0"), ("1", "chip_too_hot", "fail", "500.0"),
        ("", "chip_missing", "fail", "500.0"), ("0", "chip_hot", "warn", "500.0")}


def test_each_chip_has_its_worst_status_and_the_cause_that_leads_there() -> None:
    checks = _checks()
    chips = {c["npu"]: (c["status"], c["cause"]) for c in _by_metric(checks, {})["npu_chip_status"]}
    # NPU 1: link down weighs more than a hot chip; NPU 3 could not be judged; NPU 2 is fine
    assert chips == {"0": ("warn", "chip_hot"), "1": ("fail", "link_down"), "2": ("ok", ""),
                     "3": ("unknown", "hbm_ecc")}


def test_the_node_verdict_is_the_one_lead() -> None:
    (node,) = _by_metric(_checks(), {})["npu_node_status"]
    verdict = lead(_checks())
    assert (node["status"], node["cause"], node["npu"]) == (verdict.status, verdict.cause, str(verdict.npu))
    assert (node["status"], node["cause"], node["npu"]) == ("fail", "link_down", "1")
