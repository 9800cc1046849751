"""Conformance of the communicator facts (``collectors.hccl.comm``) on the captured logs in ../shared/corpus.

Every corpus log and ``tools/hccl-*`` capture is read; the ones listed here must yield exactly these
records (every field), all others none. Skips cleanly when the corpus is absent.
"""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

import pytest

from collectors.hccl.comm import parse_lines
from collectors.hccl.facts import (
    CollectiveFailure,
    CollectiveOp,
    Fact,
    InitTimeout,
    RankIdentity,
    RootInfoCreated,
    WatchdogTimeout,
)
from tests.support.paths import CORPUS

if not (CORPUS / "logs").is_dir():
    pytest.skip(f"corpus not found at {CORPUS}", allow_module_level=True)

# glog times carry no year: the watchdog capture (vllm-ascend #382) is from March 2025.
REF_TIME = datetime(2025, 12, 31, 12, 0, 0).timestamp()
G_1024 = "127.10.0.1%enp_60000_0_1761275812718970"  # the 4-rank communicator of corpus 01, 32-34
G_1120 = "127.10.0.1%enp_60000_0_1763610996711234"  # corpus 39 (rank 0 prints it with a stray leading "9")
G_RC = "51.38.67.143%enp189s0f0_60004_4_1711621428426055"


def at(*parts: int) -> float:
    """Local epoch of (y, m, d, h, mi, s[, microseconds]), as the node printed it."""
    *clock, micros = parts if len(parts) == 7 else (*parts, 0)
    return datetime(*clock).timestamp() + micros / 1e6  # type: ignore[arg-type, misc]


# name prefix -> every fact of the file, in line order
EXPECTED: dict[str, list[Fact]] = {
    "01_doc_ei0002_task_exception_plog.log": [
        CollectiveFailure(group=G_1024, op="AllReduce", rank=0, timestamp=at(2025, 10, 24, 11, 18, 29, 499235),
                          stream=2, task=21, index=21, device=0, tag="AllReduce_" + G_1024, rank_size=4,
                          issued_at=at(2025, 10, 24, 11, 16, 55, 493816), count=256, data_type="float32", pid=2111665,
                          line_no=1),
        RankIdentity(group=G_1024, rank=0, rank_size=4, device=0, pid=2111665,
                     timestamp=at(2025, 10, 24, 11, 18, 29, 499235), shape="task_failure", line_no=1),
    ],
    "08_doc_ei0012_sdma_error.log": [
        CollectiveFailure(group="group_name_0", op="AllGather", rank=0, timestamp=at(2025, 5, 12, 20, 55, 44, 706132),
                          stream=32, task=21, index=4, device=0, tag="AllGather_group_name_0", rank_size=8,
                          issued_at=at(2025, 5, 12, 20, 54, 51, 268778), count=3397632, data_type="uint8", pid=57096,
                          line_no=4),
        RankIdentity(group="group_name_0", rank=0, rank_size=8, device=0, pid=57096,
                     timestamp=at(2025, 5, 12, 20, 55, 44, 706132), shape="task_failure", line_no=4),
    ],
    "12_gh_lmdeploy-3354_fftsplus_timeout_stu": [
        # continuation lines of a screen EI0002 block: no header, so no pid and no time
        CollectiveFailure(group="172.16.38.219%eth0_60000_0_1742963775856197", op="Broadcast", rank=3,
                          timestamp=None, stream=587172328, task=9865,
                          tag="Broadcast_172.16.38.219%eth0_60000_0_1742963775856197", rank_size=8, line_no=4),
        RankIdentity(group="172.16.38.219%eth0_60000_0_1742963775856197", rank=3, rank_size=8, shape="task_failure",
                     line_no=4),
    ],
    "27_mc_fixture_device_log_aicpu_notify_wa": [
        CollectiveFailure(group="group_name_17271", op="Send", rank=1, timestamp=at(2025, 8, 6, 23, 9, 1, 834041),
                          stream=149, task=26064, index=39013693,
                          tag="worldCommSendRecv_2_1_group_name_17271SendExecutor_device", remote_rank=0,
                          task_type="NOTIFY WAIT", count=1048576, data_type="11", pid=5375, line_no=2),
        RankIdentity(group="group_name_17271", rank=1, pid=5375, timestamp=at(2025, 8, 6, 23, 9, 1, 834041),
                     shape="task_failure", line_no=2),
    ],
    "32_doc_ei0002_two_ranks_allreduce_vs_all": [
        CollectiveFailure(group=G_1024, op="AllReduce", rank=0, timestamp=at(2025, 10, 24, 11, 18, 29, 499235),
                          stream=2, task=21, index=21, device=0, tag="AllReduce_" + G_1024, rank_size=4,
                          issued_at=at(2025, 10, 24, 11, 16, 55, 493816), count=256, data_type="float32", pid=2111665,
                          line_no=2),
        RankIdentity(group=G_1024, rank=0, rank_size=4, device=0, pid=2111665,
                     timestamp=at(2025, 10, 24, 11, 18, 29, 499235), shape="task_failure", line_no=2),
        CollectiveFailure(group=G_1024, op="AllGather", rank=1, timestamp=at(2025, 10, 24, 11, 18, 29, 513755),
                          stream=2, task=21, index=21, device=1, tag="AllGather_" + G_1024, rank_size=4,
                          issued_at=at(2025, 10, 24, 11, 16, 55, 489331), count=256, data_type="float32", pid=2111666,
                          line_no=7),
        RankIdentity(group=G_1024, rank=1, rank_size=4, device=1, pid=2111666,
                     timestamp=at(2025, 10, 24, 11, 18, 29, 513755), shape="task_failure", line_no=7),
    ],
    "33_doc_ei0002_two_ranks_same_allreduce_5": [
        CollectiveFailure(group=G_1024, op="AllReduce", rank=0, timestamp=at(2025, 10, 24, 22, 3, 14, 946261),
                          stream=2, task=21, index=21, device=0, tag="AllReduce_" + G_1024, rank_size=4,
                          issued_at=at(2025, 10, 24, 11, 16, 55, 493816), count=256, data_type="float32", pid=2111665,
                          line_no=2),
        RankIdentity(group=G_1024, rank=0, rank_size=4, device=0, pid=2111665,
                     timestamp=at(2025, 10, 24, 22, 3, 14, 946261), shape="task_failure", line_no=2),
        CollectiveFailure(group=G_1024, op="AllReduce", rank=1, timestamp=at(2025, 10, 24, 22, 8, 58, 890365),
                          stream=2, task=21, index=21, device=1, tag="AllReduce_" + G_1024, rank_size=4,
                          issued_at=at(2025, 10, 24, 11, 16, 55, 489331), count=256, data_type="float32", pid=2111666,
                          line_no=7),
        RankIdentity(group=G_1024, rank=1, rank_size=4, device=1, pid=2111666,
                     timestamp=at(2025, 10, 24, 22, 8, 58, 890365), shape="task_failure", line_no=7),
    ],
    "34_doc_grep_run_plog_Entry_HcclCommInitR": [
        RankIdentity(group=G_1024, rank=2, rank_size=4, device=2, pid=2111667, root="127.10.0.1:60000",
                     timestamp=at(2025, 10, 24, 11, 16, 52, 724374), shape="comm_init", line_no=1),
        RankIdentity(group=G_1024, rank=3, rank_size=4, device=3, pid=2111668, root="127.10.0.1:60000",
                     timestamp=at(2025, 10, 24, 11, 16, 52, 725226), shape="comm_init", line_no=2),
        RankIdentity(group=G_1024, rank=0, rank_size=4, device=0, pid=2111665, root="127.10.0.1:60000",
                     timestamp=at(2025, 10, 24, 11, 16, 52, 719213), shape="comm_init", line_no=3),
        RankIdentity(group=G_1024, rank=1, rank_size=4, device=1, pid=2111666, root="127.10.0.1:60000",
                     timestamp=at(2025, 10, 24, 11, 16, 52, 719502), shape="comm_init", line_no=4),
    ],
    "35_doc_hccl_entry_log_enable_allreduce_o": [
        CollectiveOp(op="AllReduce", group="127.10.0.1%eth_60000_0_1741318944927847",
                     tag="AllReduce_127.10.0.1%eth_60000_0_1741318944927847", rank=0, count=10746295,
                     data_type="float32", reduce_op="sum", stream=7, comm="0xfffe380078d0", device=0, pid=3015875,
                     timestamp=at(2025, 3, 7, 11, 43, 32, 305623), line_no=1),
        CollectiveOp(op="AllReduce", group="127.10.0.1%eth_60000_0_1741318944927847",
                     tag="AllReduce_127.10.0.1%eth_60000_0_1741318944927847", rank=0, count=1024, data_type="float32",
                     reduce_op="sum", stream=2, comm="0xfffe380078d0", device=0, pid=3015875,
                     timestamp=at(2025, 3, 7, 11, 43, 32, 306413), line_no=2),
    ],
    "36_doc_ei0015_root_server_topo_exchange_": [
        InitTimeout(role="root", expected=8, connected=(0, 2, 4, 6), missing=(1, 3, 5, 7), timeout_s=120.0,
                    pid=1041081, timestamp=at(2025, 11, 21, 1, 20, 1, 624966), line_no=1),
    ],
    "37_doc_ei0015_agent_failed_to_connect_ag": [
        InitTimeout(role="agent", expected=8, connected=(0, 2, 4, 6), missing=(1, 3, 5, 7), pid=1041085,
                    timestamp=at(2025, 11, 21, 1, 20, 1, 630122), line_no=1),
    ],
    "38_doc_ei0015_agent_topo_exchange_agent_": [
        InitTimeout(role="agent", root="127.10.0.1:60000", timeout_s=120.0, pid=7988,
                    timestamp=at(2025, 3, 19, 4, 16, 13, 978979), line_no=1),
    ],
    "39_doc_run_plog_Entry_rank3_200s_late_in": [
        RankIdentity(group=G_1120, rank=3, rank_size=4, device=3, pid=3079955, root="127.10.0.1:60000",
                     timestamp=at(2025, 11, 20, 11, 59, 56, 716583), shape="comm_init", line_no=1),
        RootInfoCreated(pid=3079952, device=0, timestamp=at(2025, 11, 20, 11, 56, 36, 704523), line_no=2),
        RankIdentity(group="9127.10.0.1%enp_60000_0_1763610996711234", rank=0, rank_size=4, device=0, pid=3079952,
                     root="127.10.0.1:60000", timestamp=at(2025, 11, 20, 11, 56, 36, 711546), shape="comm_init",
                     line_no=3),
        RankIdentity(group=G_1120, rank=1, rank_size=4, device=1, pid=3079953, root="127.10.0.1:60000",
                     timestamp=at(2025, 11, 20, 11, 56, 36, 712024), shape="comm_init", line_no=4),
        RankIdentity(group=G_1120, rank=2, rank_size=4, device=2, pid=3079954, root="127.10.0.1:60000",
                     timestamp=at(2025, 11, 20, 11, 56, 36, 712065), shape="comm_init", line_no=5),
    ],
    "hccl-log_EI0002-notify-wait-timeout-hear": [
        # a graph-mode tag names no group, and this screen text prints no rank
        CollectiveFailure(group=None, op="AllReduce", rank=None, timestamp=at(2022, 12, 1, 0, 26, 58, 399787),
                          stream=14, task=4,
                          tag="HcomAllReduce_6629421139219749105_0", remote_rank=0, task_type="Notify Wait",
                          pid=162844, line_no=3),
    ],
    "hccl-log_EI0002-torch_npu-507048-Cluster": [
        CollectiveFailure(group="90.90.92.240%enp189s0f0_60000_0_1732766162316022", op="AllReduce", rank=None,
                          timestamp=at(2024, 11, 28, 11, 59, 30, 645648), stream=2282987520, task=5,
                          tag="AllReduce_90.90.92.240%enp189s0f0_60000_0_1732766162316022", pid=7277, line_no=4),
    ],
    "hccl-log_torch_npu-watchdog-WorkHCCL-ALL": [
        WatchdogTimeout(rank=1, seq=196, op="ALLREDUCE", timeout_s=3600.0, elapsed_s=3600.185,
                        timestamp=at(2025, 3, 24, 13, 0, 25) + 0.428029551, line_no=1),
        WatchdogTimeout(rank=0, seq=196, op="ALLREDUCE", timeout_s=3600.0, elapsed_s=3600.993,
                        timestamp=at(2025, 3, 24, 13, 0, 25) + 0.236600964, line_no=7),
    ],
    "hccl-plog_HcclCommInitRootInfo-socket-re": [
        RankIdentity(group=G_RC, rank=6, rank_size=8, device=2, pid=123, root="51.38.67.143:60004",
                     timestamp=at(2024, 3, 28, 10, 23, 47, 960557), shape="comm_init", line_no=1),
        RankIdentity(group=G_RC, rank=6, rank_size=8, device=2, pid=123, server="51.38.67.141", device_phy=6,
                     device_ip="192.168.102.203", timestamp=at(2024, 3, 28, 10, 23, 50, 588335), shape="setup_agent",
                     line_no=2),
        RankIdentity(group=G_RC, rank=6, rank_size=8, pid=123, server="51.38.67.141",
                     timestamp=at(2024, 3, 28, 10, 25, 50, 599958), shape="init_failed", line_no=11),
    ],
    "hccl-plog_TaskExceptionHandler-NotifyWai": [
        CollectiveFailure(group="10.136.181.175%enp179s0f0_60000_0_1712529353144389", op="AllReduce", rank=0,
                          timestamp=at(2024, 4, 8, 2, 55, 4, 903511), stream=3, task=77726298, index=3,
                          tag="AllReduce_10.136.181.175%enp179s0f0_60000_0_1712529353144389", rank_size=4,
                          task_type="Notify Wait", pid=69395, line_no=2),
        RankIdentity(group="10.136.181.175%enp179s0f0_60000_0_1712529353144389", rank=0, rank_size=4, pid=69395,
                     timestamp=at(2024, 4, 8, 2, 55, 4, 903511), shape="task_failure", line_no=2),
    ],
    "hccl-plog_topo-exchange-server-socket-ti": [
        InitTimeout(role="root", connected=(0, 1, 2, 3, 4, 5, 6), timeout_s=120.0, pid=148,
                    timestamp=at(2024, 3, 28, 10, 25, 48, 427201), line_no=1),
    ],
}


def corpus_files() -> list[Path]:
    logs = [p for p in sorted((CORPUS / "logs").iterdir()) if p.is_file() and p.name != "INDEX.md"]
    return logs + sorted((CORPUS / "tools").glob("hccl-*"))


def test_every_expectation_matches_one_corpus_file() -> None:
    names = [p.name for p in corpus_files()]
    for key in EXPECTED:
        assert sum(name.startswith(key) for name in names) == 1, key


@pytest.mark.parametrize("path", corpus_files(), ids=lambda p: p.name[:48])
def test_corpus_file_facts(path: Path) -> None:
    expected = [facts for key, facts in EXPECTED.items() if path.name.startswith(key)]
    facts = parse_lines(path.read_text(encoding="utf-8", errors="replace").splitlines(), REF_TIME)
    assert facts == (expected[0] if expected else [])


def test_init_skew_of_corpus_39_is_visible() -> None:
    """Rank 3 called HcclCommInitRootInfoInner 200 s after the others (HCCL_CONNECT_TIMEOUT 120 s)."""
    (path,) = (CORPUS / "logs").glob("39_*")
    inits = [f for f in parse_lines(path.read_text(encoding="utf-8").splitlines(), REF_TIME)
             if isinstance(f, RankIdentity)]
    late = max(inits, key=lambda f: f.timestamp or 0.0)
    others = [f.timestamp for f in inits if f is not late and f.timestamp is not None]
    assert late.rank == 3
    assert late.timestamp is not None and round(late.timestamp - max(others)) == 200
