"""Conformance of the HCCL/CANN log classifier on the real captured logs in ../shared/corpus.

Every log in ``corpus/logs`` and every ``corpus/tools/hccl-*`` capture is listed here with exactly
the incidents it yields (line, code, category of every counted event) and exactly the distinct
culprit hints its lines print (a new corpus file fails until someone decides what it means).
Skips cleanly when the corpus is absent.
"""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from agent.diagnose.scan_logs import main
from agent.health.status import EXIT_CODES
from collectors.hccl.classify import StreamClassifier
from tests.support.paths import CORPUS

if not (CORPUS / "logs").is_dir():
    pytest.skip(f"corpus not found at {CORPUS}", allow_module_level=True)

Incident = tuple[int, str, str]  # line number, code, category

# name prefix -> (every counted incident by line, the set of distinct (kind, value) hints)
EXPECTED: dict[str, tuple[list[Incident], set[tuple[str, str]]]] = {
    "01_doc_ei0002": ([(1, "task_exec_timeout", "exec_timeout")], set()),
    "02_doc_heartbeat": ([(1, "heartbeat_lost", "heartbeat"), (2, "heartbeat_lost", "heartbeat"),
                          (3, "rank_stuck", "heartbeat")],
        {("crimer_rank", "127.10.0.2/2"), ("exception_location", "127.10.0.1/1")}),
    # The screen text (2025-12-04) and the plog lines (2025-09-15) are two captures: two incidents.
    "03_doc_ei0013": ([(1, "EI0013", "roce_cqe"), (4, "cqe_error", "roce_cqe")],
        {("peer", "127.0.0.2/1"), ("peer", "127.10.0.2"), ("peer", "127.11.0.2")}),
    "04_doc_hccn_tool": ([], set()),
    "05_doc_ei0006": ([(1, "socket_timeout", "connect_timeout")],
        {("dst_rank", "192.168.200.100/0"), ("link_peer", "192.0.2.199/0"), ("peer", "192.168.200.100/0"),
         ("remote_rank", "0")}),
    "07_doc_hccl_env": ([], set()),
    "08_doc_ei0012": ([(1, "EI0012", "sdma"), (2, "sdma_error", "sdma"), (4, "task_exec_timeout", "exec_timeout")],
        {("remote_rank", "0"), ("remote_rank", "4800")}),
    "10_gh_vllm-ascend-1443": ([(2, "507048", "stream_sync_timeout")], set()),
    "11_gh_lmdeploy-3354": ([(2, "fftsplus_timeout", "exec_timeout")], set()),
    "12_gh_lmdeploy-3354": ([(1, "stuck_notify", "exec_timeout"), (6, "rank_stuck", "heartbeat")],
        {("exception_location", "172.16.38.219/6")}),
    "14_gh_vllm-ascend-486": ([(4, "EI0006", "connect_timeout")], set()),
    "15_gh_vllm-ascend-1955": ([(1, "port_listen_failed", "init"), (4, "socket_timeout", "connect_timeout")], set()),
    # HCCP / HCCL init lines of one port-down incident: the first one names it, the rest are part of it.
    "18_gh_vllm-ascend-1815": ([(1, "ra_init_failed", "init")], set()),
    "19_gh_llamafactory-3839": ([(3, "EJ0001", "init")], set()),
    "20_gh_llamafactory-5071": ([(1, "EI0006", "connect_timeout")], set()),
    # 507046 and EE1002 are one stream synchronize timeout: one incident, counted under the line that dates it.
    "21_gh_pytorch-48": ([(4, "EE1002", "stream_sync_timeout")], set()),
    "23_mc_fixture_dmesg": ([(1, "device_heartbeat_lost", "heartbeat")],
        {("device", "1")}),
    "24_mc_fixture_npu_smi": ([], set()),
    "26_mc_fixture_hccn": ([], set()),
    "27_mc_fixture_device_log": ([(2, "notify_wait", "exec_timeout")],
        {("remote_rank", "0")}),
    "29_mc_fixture_link_error": ([(1, "link_error", "connect_timeout")],
        {("link_peer", "124.0.0.11/1")}),
    "30_doc_hccl_test_all_reduce": ([], set()),
    "31_doc_hccl_test_retcode7": ([(3, "comm_init_failed", "init")], set()),
    # Two ranks of one communicator, each printing its own 3-line Task-run-failed block, 14 ms apart.
    "32_doc_ei0002_two_ranks_allreduce_vs_allgather": ([(2, "task_exec_timeout", "exec_timeout")], set()),
    # The same AllReduce timing out on two ranks 5 min 44 s apart: two incidents, counted twice.
    "33_doc_ei0002_two_ranks_same_allreduce": (
        [(2, "task_exec_timeout", "exec_timeout"), (7, "task_exec_timeout", "exec_timeout")], set()),
    # INFO-level Entry- lines (rank -> pid/device maps): no error to count (see test_conformance_hccl_comm).
    "34_doc_grep_run_plog_Entry": ([], set()),
    "35_doc_hccl_entry_log_enable": ([], set()),
    # EI0015 root: 4 of 8 ranks connected; the missing ones are the culprits.
    "36_doc_ei0015_root_server": ([(1, "topo_exchange_timeout", "rendezvous_timeout")],
        {("missing_rank", "1"), ("missing_rank", "3"), ("missing_rank", "5"), ("missing_rank", "7")}),
    # EI0015 agent: the root's list of ranks that never connected.
    "37_doc_ei0015_agent_failed_to_connect": ([(1, "topo_detect_failed", "rendezvous_timeout")],
        {("missing_rank", "1"), ("missing_rank", "3"), ("missing_rank", "5"), ("missing_rank", "7")}),
    "38_doc_ei0015_agent_topo_exchange": ([(1, "topo_exchange_timeout", "rendezvous_timeout")],
        {("root_server", "127.10.0.1:60000")}),
    "39_doc_run_plog_Entry_rank3": ([], set()),
    # EI0019 screen line (11:38) and plog bind failure (13:18) are two captures: two incidents.
    "40_doc_ei0019_host_port_bind": ([(1, "EI0019", "init"), (3, "port_listen_failed", "init")], set()),
    "hccl-log_EI0002-notify-wait": ([(3, "EI0002", "exec_timeout"), (5, "heartbeat_lost", "heartbeat")],
        {("server_device", "10.*.*.*/0"), ("remote_rank", "0")}),
    "hccl-log_EI0002-torch_npu-507048": ([(1, "507048", "stream_sync_timeout"), (4, "EI0002", "exec_timeout"),
                                          (6, "heartbeat_lost", "heartbeat")],
        {("exception_location", "90.90.92.240/1")}),
    "hccl-log_torch_npu-watchdog": ([(1, "watchdog", "watchdog_timeout")], set()),
    # A client waiting for the rank table: the socket recv timeout is the rendezvous (topo exchange
    # lines follow it), the summary lines after it are part of the incident.
    "hccl-plog_HcclCommInitRootInfo": ([(5, "topo_detect_failed", "rendezvous_timeout")], set()),
    "hccl-plog_TaskExceptionHandler": ([(2, "notify_wait", "exec_timeout")], set()),
    "hccl-plog_topo-exchange": ([(1, "topo_exchange_timeout", "rendezvous_timeout")], set()),
    # Rank tables are JSON, not logs: the scanner must find nothing in them.
    "hccl-ranktable_v1.0": ([], set()),
    "hccl-ranktable_v1.2": ([], set()),
}


def corpus_files() -> list[Path]:
    logs = [p for p in sorted((CORPUS / "logs").iterdir()) if p.is_file() and p.name != "INDEX.md"]
    return logs + sorted((CORPUS / "tools").glob("hccl-*"))


def expectation(path: Path) -> tuple[list[Incident], set[tuple[str, str]]]:
    matches = [key for key in EXPECTED if path.name.startswith(key)]
    assert len(matches) == 1, f"no (or an ambiguous) expectation for corpus file {path.name}"
    return EXPECTED[matches[0]]


def test_every_expectation_matches_a_corpus_file() -> None:
    names = [p.name for p in corpus_files()]
    for key in EXPECTED:
        assert any(name.startswith(key) for name in names), key


@pytest.mark.parametrize("path", corpus_files(), ids=lambda p: p.name[:48])
def test_corpus_file_incidents_and_hints(path: Path) -> None:
    incidents, hints = expectation(path)
    stream = StreamClassifier(source=path.name, ref_time=path.stat().st_mtime)
    events, found_hints = stream.feed_lines(path.read_text(encoding="utf-8", errors="replace").splitlines())
    assert sorted((e.line_no, e.code, e.category) for e in events) == incidents
    assert {(h.kind, h.value) for h in found_hints} == hints
    assert all(e.timestamp is None or e.timestamp > 1.5e9 for e in events)


def test_scan_logs_over_the_corpus() -> None:
    out = io.StringIO()
    code = main([str(path) for path in corpus_files()], True, out=out)
    assert code == EXIT_CODES["nagios"]["fail"]  # the corpus holds a lost device and an SDMA fault: node faults
    data = json.loads(out.getvalue())
    assert data["verdict"]["cause"] == "device_lost"  # the heaviest, as check and diagnose lead
    expected: dict[str, int] = {}
    for incidents, _ in EXPECTED.values():
        for _, _, category in incidents:
            expected[category] = expected.get(category, 0) + 1
    # 32 quotes 01's rank-0 block (same process, time and text): a copy, counted once across the corpus
    assert data["copies"] == 1
    expected["exec_timeout"] -= 1
    assert data["counts_by_category"] == expected
    assert data["errors"] == []
