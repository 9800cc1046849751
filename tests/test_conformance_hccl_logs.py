"""Conformance of the HCCL/CANN log classifier on the real captured logs in ../shared/corpus.

Every log in ``corpus/logs`` and every ``corpus/tools/hccl-*`` capture must be listed here with
the exact set of categories it yields (a new corpus file fails until someone decides what it
means). Skips cleanly when the corpus is absent.
"""

from __future__ import annotations

import io
import json
import os
from collections import Counter
from pathlib import Path

import pytest

from agent.diagnose.scan_logs import EXIT_ERRORS, main
from collectors.hccl_classify import StreamClassifier

CORPUS = Path(os.environ.get("NPUWATCH_CORPUS") or Path(__file__).resolve().parents[2] / "shared" / "corpus")
if not (CORPUS / "logs").is_dir():
    pytest.skip(f"corpus not found at {CORPUS}", allow_module_level=True)

# name prefix -> (categories, codes that must be counted with their counts, hints that must appear)
EXPECTED: dict[str, tuple[set[str], dict[str, int], set[tuple[str, str]]]] = {
    "01_doc_ei0002": ({"exec_timeout"}, {"task_exec_timeout": 1}, set()),
    "02_doc_heartbeat": ({"heartbeat"}, {"heartbeat_lost": 2, "rank_stuck": 1},
                         {("crimer_rank", "127.10.0.2/2"), ("exception_location", "127.10.0.1/1")}),
    "03_doc_ei0013": ({"roce_cqe"}, {"EI0013": 1}, {("peer", "127.0.0.2/1")}),
    "04_doc_hccn_tool": (set(), {}, set()),
    "05_doc_ei0006": ({"connect_timeout"}, {"socket_timeout": 1},
                      {("dst_rank", "192.168.200.100/0"), ("link_peer", "192.0.2.199/0")}),
    "07_doc_hccl_env": (set(), {}, set()),
    "08_doc_ei0012": ({"sdma", "exec_timeout"}, {"EI0012": 1}, set()),
    "10_gh_vllm-ascend-1443": ({"stream_sync_timeout"}, {"507048": 1}, set()),
    "11_gh_lmdeploy-3354": ({"exec_timeout"}, {"fftsplus_timeout": 1}, set()),
    "12_gh_lmdeploy-3354": ({"exec_timeout", "heartbeat"}, {"rank_stuck": 1},
                            {("exception_location", "172.16.38.219/6")}),
    "14_gh_vllm-ascend-486": ({"connect_timeout"}, {"EI0006": 1}, set()),
    "15_gh_vllm-ascend-1955": ({"init", "connect_timeout"}, {"port_listen_failed": 1, "socket_timeout": 1},
                               set()),
    "18_gh_vllm-ascend-1815": ({"init"}, {}, set()),
    "19_gh_llamafactory-3839": ({"init"}, {"EJ0001": 1}, set()),
    "20_gh_llamafactory-5071": ({"connect_timeout"}, {"EI0006": 1}, set()),
    "21_gh_pytorch-48": ({"stream_sync_timeout"}, {"EE1002": 1, "507046": 1}, set()),
    "23_mc_fixture_dmesg": ({"heartbeat"}, {"device_heartbeat_lost": 1}, {("device", "1")}),
    "24_mc_fixture_npu_smi": (set(), {}, set()),
    "26_mc_fixture_hccn": (set(), {}, set()),
    "27_mc_fixture_device_log": ({"exec_timeout"}, {"notify_wait": 1}, {("remote_rank", "0")}),
    "29_mc_fixture_link_error": ({"connect_timeout"}, {"link_error": 1}, {("link_peer", "124.0.0.11/1")}),
    "30_doc_hccl_test_all_reduce": (set(), {}, set()),
    "31_doc_hccl_test_retcode7": ({"init"}, {"comm_init_failed": 1}, set()),
    # Two ranks of one communicator, each printing its own 3-line Task-run-failed block.
    "32_doc_ei0002_two_ranks_allreduce_vs_allgather": ({"exec_timeout"}, {"task_exec_timeout": 1}, set()),
    # The same AllReduce timing out on two ranks 5 min 44 s apart: two incidents, counted twice.
    "33_doc_ei0002_two_ranks_same_allreduce": ({"exec_timeout"}, {"task_exec_timeout": 2}, set()),
    # INFO-level Entry- lines (rank -> pid/device maps): no error to count.
    "34_doc_grep_run_plog_Entry": (set(), {}, set()),
    "35_doc_hccl_entry_log_enable": (set(), {}, set()),
    "36_doc_ei0015_root_server": ({"rendezvous_timeout"}, {"topo_exchange_timeout": 1}, set()),
    "37_doc_ei0015_agent_failed_to_connect": (set(), {}, set()),
    "38_doc_ei0015_agent_topo_exchange": ({"rendezvous_timeout"}, {"topo_exchange_timeout": 1}, set()),
    "39_doc_run_plog_Entry_rank3": (set(), {}, set()),
    "40_doc_ei0019_host_port_bind": ({"init", "other"}, {"EI0019": 1, "port_listen_failed": 1}, set()),
    "hccl-log_EI0002-notify-wait": ({"exec_timeout", "heartbeat"}, {"EI0002": 1},
                                    {("remote_rank", "0"), ("exception_location", "10.*.*.*/0")}),
    "hccl-log_EI0002-torch_npu-507048": ({"exec_timeout", "stream_sync_timeout", "heartbeat"},
                                         {"EI0002": 1, "507048": 1, "heartbeat_lost": 1},
                                         {("exception_location", "90.90.92.240/1")}),
    "hccl-log_torch_npu-watchdog": ({"watchdog_timeout"}, {"watchdog": 1}, set()),
    "hccl-plog_HcclCommInitRootInfo": ({"connect_timeout"}, {"socket_timeout": 1}, set()),
    "hccl-plog_TaskExceptionHandler": ({"exec_timeout"}, {"notify_wait": 1}, set()),
    "hccl-plog_topo-exchange": ({"rendezvous_timeout"}, {"topo_exchange_timeout": 1}, set()),
    # Rank tables are JSON, not logs: the scanner must find nothing in them.
    "hccl-ranktable_v1.0": (set(), {}, set()),
    "hccl-ranktable_v1.2": (set(), {}, set()),
}


def corpus_files() -> list[Path]:
    logs = [p for p in sorted((CORPUS / "logs").iterdir()) if p.is_file() and p.name != "INDEX.md"]
    return logs + sorted((CORPUS / "tools").glob("hccl-*"))


def expectation(path: Path) -> tuple[set[str], dict[str, int], set[tuple[str, str]]]:
    matches = [key for key in EXPECTED if path.name.startswith(key)]
    assert len(matches) == 1, f"no (or an ambiguous) expectation for corpus file {path.name}"
    return EXPECTED[matches[0]]


def test_every_expectation_matches_a_corpus_file() -> None:
    names = [p.name for p in corpus_files()]
    for key in EXPECTED:
        assert any(name.startswith(key) for name in names), key


@pytest.mark.parametrize("path", corpus_files(), ids=lambda p: p.name[:48])
def test_corpus_file_categories(path: Path) -> None:
    categories, codes, hints = expectation(path)
    stream = StreamClassifier(source=path.name, ref_time=path.stat().st_mtime)
    events, found_hints = stream.feed_lines(path.read_text(encoding="utf-8", errors="replace").splitlines())
    assert {e.category for e in events} == categories
    counted = Counter(e.code for e in events)
    for code, count in codes.items():
        assert counted[code] == count, (code, counted)
    assert hints <= {(h.kind, h.value) for h in found_hints}
    assert all(e.timestamp is None or e.timestamp > 1.5e9 for e in events)


def test_scan_logs_over_the_corpus() -> None:
    out = io.StringIO()
    code = main([str(CORPUS / "logs"), *map(str, sorted((CORPUS / "tools").glob("hccl-*")))], True, out=out)
    assert code == EXIT_ERRORS
    data = json.loads(out.getvalue())
    assert set(data["counts_by_category"]) >= {"exec_timeout", "connect_timeout", "rendezvous_timeout",
                                               "roce_cqe", "sdma", "watchdog_timeout",
                                               "stream_sync_timeout", "heartbeat", "init"}
    assert data["errors"] == []
