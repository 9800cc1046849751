"""The fleet's straggler finding in triage (agent.triage.stragglers): NPUJobStraggler's labels as a record, the
record as check's finding with the registry's words, action and runbook, and its rank in triage's verdict."""

from __future__ import annotations

from agent.health.thresholds import fault_kind
from agent.triage.engine import analyze
from agent.triage.evidence import Evidence, JobStraggler, LocalFault, RankFailure, RankSeen
from agent.triage.render import render_text
from agent.triage.stragglers import fleet_alerts, straggler_findings, straggler_of

T0 = 1_761_300_000.0
COMM = "29.1.0.10%enp_60000_0_17"
# A firing alert of alerts/failslow.rules.yml, as Prometheus writes ALERTS: the condition's labels and the rule's.
FIRING = {"__name__": "ALERTS", "alertname": "NPUJobStraggler", "alertstate": "firing", "severity": "warning",
          "kind": "job_straggler", "status": "warn", "job": "npuwatch", "instance": "10.0.0.2:9101",
          "node": "node-b", "npu": "3", "chip": "0", "rank": "19", "cause": "compute", "training_job": "llm-7"}
HOST = {"alertname": "NPUJobStraggler", "alertstate": "firing", "severity": "warning", "kind": "job_straggler",
        "status": "warn", "node": "node-d", "cause": "host", "training_job": "llm-7"}


def straggler(labels: dict[str, str] = FIRING) -> JobStraggler:
    found = straggler_of(labels, at=T0)
    assert found is not None, labels
    return found


def evidence(*stragglers: JobStraggler, faults: tuple[LocalFault, ...] = ()) -> Evidence:
    read = Evidence(stragglers=list(stragglers), faults=list(faults), fleet_view=True)
    for node in ("node-a", "node-b", "node-d"):  # as a Prometheus gives them: its up series, no file
        read.coverage(node).saw(T0)
    return read


def test_the_alerts_labels_are_the_record() -> None:
    compute = straggler()
    assert (compute.node, compute.training_job, compute.npu, compute.rank, compute.cause, compute.kind) == (
        "node-b", "llm-7", 3, 19, "compute", "job_straggler")
    host = straggler(HOST)
    assert (host.node, host.npu, host.rank, host.cause) == ("node-d", None, None, "host")
    # a ruler whose rule predates the kind label: the alert's name says which fleet kind
    older = straggler({k: v for k, v in FIRING.items() if k not in ("kind", "status")})
    assert older.kind == "job_straggler"


def test_labels_that_name_no_fleet_kind_or_cannot_place_it_are_no_straggler() -> None:
    assert straggler_of({**FIRING, "kind": "link_down"}) is None  # a node's finding, not the fleet's
    assert straggler_of({**FIRING, "alertname": "NPURoCELinkDown", "kind": ""}) is None
    assert straggler_of({k: v for k, v in FIRING.items() if k != "training_job"}) is None
    assert straggler_of({k: v for k, v in FIRING.items() if k != "node"}) is None


def test_the_query_selects_the_fleet_kinds_firing_alerts_of_the_job_or_of_none() -> None:
    assert fleet_alerts("npuwatch") == 'ALERTS{alertname=~"NPUJobStraggler", alertstate="firing", job=~"npuwatch|"}'


def test_each_cause_has_the_registrys_words_and_action() -> None:
    entry = fault_kind("job_straggler")
    for labels in (FIRING, {**FIRING, "cause": "link"}, HOST):
        [(node, finding)] = straggler_findings([straggler(labels)])
        cause = entry.rule_cause(labels["cause"])
        assert cause is not None
        assert (node, finding.status, finding.kind, finding.check) == (labels["node"], "WARN", "job_straggler",
                                                                        "failslow")
        assert finding.detail == f"{labels['cause']}: {cause.label}"
        assert finding.hint == cause.hint != entry.hint
        assert finding.label == entry.label
    [(_, chip)] = straggler_findings([straggler()])
    assert chip.where == "node-b NPU 3, rank 19 of job llm-7"
    [(_, host)] = straggler_findings([straggler(HOST)])
    assert host.where == "node-d, job llm-7" and host.npu is None
    [(_, odd)] = straggler_findings([straggler({**FIRING, "cause": "storage"})])  # a cause the registry lacks
    assert odd.hint == entry.hint and odd.detail.startswith("storage: ")


def test_one_finding_per_job_node_npu_rank_and_cause() -> None:
    early = straggler_of(FIRING, at=T0 - 60)
    assert early is not None
    found = straggler_findings([straggler(), early, straggler({**FIRING, "cause": "link"})])
    assert [(finding.detail.split(":")[0], finding.at) for _, finding in found] == [("compute", T0 - 60),
                                                                                    ("link", T0)]


def test_a_straggler_alone_leads_as_a_warning_naming_its_rank_and_job() -> None:
    report = analyze(evidence(straggler()))
    document = report.to_dict()
    lead = document["verdict"]
    assert (report.exit_code, document["exit_code"]) == (1, 1)
    assert (lead["status"], lead["cause"], lead["node"], lead["npu"], lead["rank"], lead["training_job"],
            lead["check"]) == ("warn", "job_straggler", "node-b", 3, 19, "llm-7", "failslow")
    compute = fault_kind("job_straggler").rule_cause("compute")
    assert compute is not None
    assert lead["text"] == (f"rank, port or host slowing its training job on node-b NPU 3, rank 19 of job llm-7 "
                            f"(compute: {compute.label})")
    assert lead["action"] == compute.hint
    assert str(lead["runbook"]).endswith("/alerts/runbooks/NPUJobStraggler.md")
    [finding] = document["findings"]
    assert finding == {"node": "node-b", "npu": 3, "kind": "job_straggler", "status": "warn", "check": "failslow",
                       "where": "node-b NPU 3, rank 19 of job llm-7", "detail": f"compute: {compute.label}",
                       "training_job": "llm-7", "rank": 19, "cause": "compute", "text": lead["text"],
                       "action": compute.hint, "runbook": lead["runbook"]}
    assert document["fleet_view"] is True
    text = " ".join(render_text(report).split())
    assert f"stragglers (the fleet's rules: NPUJobStraggler) - node-b NPU 3, rank 19 of job llm-7: compute: " \
           f"{compute.label} verdict: WARN {lead['text']}" in text, text


def test_it_is_ranked_as_check_ranks_a_warning() -> None:
    """A fault that fails and a heavier warning lead before it; it leads a lighter one and is then its also."""
    failing = analyze(evidence(straggler(), faults=(LocalFault("node-a", 1, "chip_too_hot", "96 C", seen_at=T0),)))
    assert (failing.exit_code, failing.to_dict()["verdict"]["cause"]) == (2, "chip_too_hot")
    assert failing.to_dict()["verdict"]["rank"] is None
    assert [f["kind"] for f in failing.to_dict()["findings"]] == ["chip_too_hot", "job_straggler"]
    heavier = analyze(evidence(straggler(), faults=(LocalFault("node-a", 1, "optics_weak", "rx 0.05 mW"),)))
    assert (heavier.exit_code, heavier.to_dict()["verdict"]["cause"]) == (1, "optics_weak")
    lighter = analyze(evidence(straggler(), faults=(LocalFault("node-a", 1, "chip_hot", "86 C", seen_at=T0),)))
    lead = lighter.to_dict()["verdict"]
    assert (lighter.exit_code, lead["cause"], lead["rank"]) == (1, "job_straggler", 19)
    assert lead["also"] == ["chip running hot on node-a NPU 1"]


def test_an_incident_outranks_it() -> None:
    """An HCCL incident whose culprit is named (the one silent rank) leads FAIL, naming the culprit's rank; the
    straggler stays a finding."""
    read = evidence(straggler())
    for rank, node in ((0, "node-a"), (1, "node-a"), (2, "node-b"), (3, "node-b")):
        read.ranks.append(RankSeen(COMM, rank, node, 4, rank % 2))
    for rank in (0, 1, 2):
        read.failures.append(RankFailure("node-a" if rank < 2 else "node-b", T0 + rank, "EI0002", "exec_timeout",
                                         COMM, rank, 4, rank % 2))
    report = analyze(read)
    lead = report.to_dict()["verdict"]
    assert (report.exit_code, lead["status"], lead["node"], lead["npu"], lead["rank"], lead["training_job"]) == (
        2, "fail", "node-b", 1, 3, None)
    assert [f["kind"] for f in report.to_dict()["findings"]] == ["job_straggler"]


def test_without_a_fleet_view_it_says_stragglers_were_not_judged_and_with_one_says_nothing_of_none() -> None:
    offline = Evidence()
    offline.coverage("node-a").saw(T0)
    offline.coverage("node-a").files = 1
    report = analyze(offline)
    assert report.to_dict()["fleet_view"] is False and report.exit_code == 0
    assert "stragglers  not judged: only the fleet's rules can (NPUJobStraggler)" in render_text(report)
    online = analyze(evidence())  # a healthy fleet's Prometheus: read, with no record and no straggler
    assert (online.status, online.exit_code) == ("none", 0) and "straggler" not in render_text(online).lower()
    assert not online.to_dict()["findings"]
