"""One failure is one report in ``npuwatch triage``, however many lines, codes and copies print it.

A rank's failure reaches the logs several times: the plog's block, the job log's copy of it (torchrun's
``[rank0]:`` prefix, or the PID only), the EI code on the screen and the wording HCCL prints for it. Each
rank counts once, a printed code and its wording are one code, and no count in the report's wording
exceeds the ranks of the communicator.
"""

from __future__ import annotations

import io
import json
import re
from contextlib import redirect_stdout
from pathlib import Path
from typing import Any

from agent.cli import build_parser
from agent.cli import main as npuwatch
from agent.demo.node import DemoNode
from agent.triage import command
from agent.triage.engine import analyze
from agent.triage.evidence import Blame, Evidence, RankFailure, RankSeen
from tests.support.ei0002_copies import SCREEN, write_node
from tests.support.paths import CORPUS, corpus_file

T0 = 1_760_000_000.0


def triage(*paths: Path) -> dict[str, Any]:
    args = build_parser().parse_args(["triage", "--json", "--jobs", "1", *map(str, paths)])
    out = io.StringIO()
    command.main(args, out=out, err=io.StringIO())
    report: dict[str, Any] = json.loads(out.getvalue())
    return report


def counts_in(text: str) -> list[int]:
    """The numbers the wording counts things with: '31 peers', '62 ranks', '31 of 32'."""
    return [int(n) for n in re.findall(r"\b(\d+) (?:peers?|ranks?|of \d+)\b", text)]


def four_node_hang(tmp_path: Path, chips: int = 8) -> list[Path]:
    dirs = [tmp_path / f"node-{index}" for index in range(1, 5)]
    for directory in dirs:
        DemoNode(directory).create(chips=chips)
    with redirect_stdout(io.StringIO()):
        assert npuwatch(["demo", "fleet", "hccl-hang", "--culprit", "node-3", "--npu", "1", "--time", str(T0),
                         *map(str, dirs)]) == 0
    return dirs


def test_the_demo_four_node_hang_counts_each_rank_once(tmp_path: Path) -> None:
    # every victim prints its failure in its plog and again in its node's job log, with the heartbeat line
    # twice and the remote rank once: 31 ranks, not 62 reports and 93 blamers
    report = triage(*four_node_hang(tmp_path))
    [incident] = report["incidents"]
    assert incident["rank_size"] == 32
    assert incident["codes"] == ["EI0002"]  # the task_exec_timeout wording is EI0002's, not a second code
    assert len(incident["reporting_ranks"]) == 31
    culprit = incident["culprits"][0]
    assert (culprit["node"], culprit["npu"], culprit["rank"]) == ("node-3", 1, 17)
    chain = culprit["evidence"][0]
    assert "31 peers lost its heartbeat (29.3.1.11)" in chain
    assert "-> 31 ranks reported EI0002 at" in chain
    verdict = report["verdict"]
    for text in [verdict["text"], verdict["summary"] or "", *culprit["evidence"]]:
        assert all(count <= 32 for count in counts_in(text)), text


def test_the_job_logs_copy_of_a_plog_failure_is_the_same_report(tmp_path: Path) -> None:
    # a real torch_npu screen capture of EI0002 (rank 0 lost rank 1's heartbeat) beside rank 0's plog block;
    # the job log holds the screen under torchrun's prefix, or bare (its PID and Discoverer say whose it is)
    screen = corpus_file(SCREEN).read_text()
    for variant, job_log in (("prefixed", "".join(f"[rank0]:{line}\n" for line in screen.splitlines())),
                             ("bare", screen)):
        node = write_node(tmp_path / variant / "node-a", job_log)
        report = triage(node)
        [incident] = report["incidents"]
        assert incident["codes"] == ["EI0002"], variant
        assert incident["reporting_ranks"] == [0], variant
        culprit = incident["culprits"][0]
        assert culprit["rank"] == 1, variant
        chain = culprit["evidence"][0]
        assert chain.startswith("1 peer lost its heartbeat (90.90.92.240)"), (variant, chain)
        assert "-> 1 rank reported EI0002 at" in chain, (variant, chain)


def test_a_heartbeat_line_names_its_reporter_as_the_discoverer(tmp_path: Path) -> None:
    # the real heartbeat line of rank 2 about rank 1, once in the plog and once in the job log (no pid, no prefix)
    plog = corpus_file(CORPUS / "logs" / "02_doc_heartbeat_lost_and_stuck.log")
    line = next(text for text in plog.read_text().splitlines() if "Discoverer:[127.10.0.1/2]" in text)
    failure = ("[ERROR]HCCL(835695,all_reduce_test):2025-10-23-17:28:30.049.385[task_exception_handler.cc:771]"
               "[835695][TaskExecStage][Timeout][Host]Task run failed, groupRank information is group:"
               "[127.10.0.1%enp_60000_0_1761275812718970], user define information[], rankSize[4], rankId[2].")
    node = tmp_path / "node-a"
    (node / "plog").mkdir(parents=True)
    (node / "plog" / "plog-835695_20251023172806000.log").write_text(f"{line}\n{failure}\n")
    (node / "job").mkdir()
    copy = line[line.index("Cluster Exception Location"):]
    (node / "job" / "train.log").write_text(f"    {copy}\n    {copy}\n")
    [incident] = triage(node)["incidents"]
    [chain] = [text for culprit in incident["culprits"] for text in culprit["evidence"] if "peer" in text]
    assert chain.startswith("1 peer lost its heartbeat (127.10.0.1)"), chain


def test_lines_that_name_no_reporter_never_count_past_the_communicator() -> None:
    comm = "29.1.0.10%enp_60000_0_1761275812718970"
    evidence = Evidence()
    evidence.coverage("node-a").saw(T0 - 3600)
    evidence.coverage("node-a").saw(T0 + 3600)
    for rank in range(4):
        evidence.ranks.append(RankSeen(comm, rank, "node-a", 4, rank, source="init log"))
    for rank in range(3):
        evidence.failures.append(RankFailure("node-a", T0, "EI0002", "exec_timeout", comm, rank, 4, rank))
    for line in range(40):  # a job log repeating the heartbeat line, without a prefix, pid or discoverer
        evidence.blames.append(Blame("node-a", T0 - 60, "lost", comm, rank=3, source=f"job.log:{line}"))
    report = analyze(evidence)
    [incident] = report.incidents
    chain = incident.culprits[0].evidence[0]
    assert chain.startswith("3 peers lost its heartbeat (rank 3)"), chain
    assert "-> 3 ranks reported EI0002" in chain
