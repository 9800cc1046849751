"""MindIE's logs: the ATB runners' ``[2025-05-13 02:25:58.64217] [error] [tid] [file:line]`` lines beside the
plog of its ``mindie_llm_backend_connector`` process (a real excerpt, gpustack/gpustack#2021: a 310P whose
communicator init failed on rank 1 of 4)."""

from __future__ import annotations

import time

from collectors.hccl.classify import StreamClassifier
from collectors.hccl.lines import line_rank_device, parse_timestamp

PLOG = ("[ERROR] HCCL(36035,mindie_llm_backend_connector):2025-05-13-02:25:58.068.817 [op_base.cc:974][36818]"
        "[Init][CommRootInfoConfig]errNo[0x0000000005000002]HcclCommInitRootInfo failed.")
ATB = [
    "[2025-05-13 02:25:58.64217] [error] [36815] [hccl_runner.cpp:132] AllGatherHcclRunner:0 HcclCommInitRootInfo "
    "fail, error:2, rank:1, rankSize:4",
    "[2025-05-13 02:25:58.64259] [error] [36815] [comm_pool.h:43] CommPool commCreateFunc fail",
    "[2025-05-13 02:25:58.64262] [error] [36815] [hccl_runner.cpp:72] AllGatherHcclRunner:0 get hccl comm fail by "
    "rank:1",
    "[2025-05-13 02:25:58.70257] [error] [38031] [all_gather_hccl_runner.cpp:38] hcclComm is null, rank: 1",
    "[2025-05-13 02:25:58.70282] [error] [38031] [runner.cpp:115] AllGatherHcclRunner_1_1:1 Execute Failed. st: 3",
    "[2025-05-13 02:25:58.70293] [error] [38031] [graph_runner.cpp:906] WordEmbeddingRunner_1:0  node[1] execute "
    "fail, runner name:AllGatherHcclRunner",
]
AT = time.mktime((2025, 5, 13, 2, 25, 58, 0, 0, -1))


def test_the_atb_runners_lines_are_one_dated_init_failure_of_rank_1() -> None:
    events, _ = StreamClassifier(source="mindie.log").feed_lines(ATB)
    [event] = events
    assert (event.code, event.category, event.rank) == ("hccl_comm_init_failed", "init", 1)
    assert event.timestamp is not None and abs(event.timestamp - (AT + 0.64217)) < 1e-6


def test_with_the_plog_line_it_is_still_one_incident() -> None:
    events, _ = StreamClassifier(source="job.log").feed_lines([PLOG, *ATB])
    assert [(e.code, e.category) for e in events] == [("hccl_comm_init_failed", "init")]


def test_bracketed_date_times() -> None:
    assert parse_timestamp("[2025-05-13 02:25:58.64217] [error] x") == AT + 0.64217
    assert parse_timestamp("[2025-05-13 02:25:58:955] torch_npu.memory: [ERROR] x") == AT + 0.955
    assert parse_timestamp("[2025-05-13 02:25:58] x") == AT
    assert parse_timestamp("[2025-13-13 02:25:58] x") is None  # no such month
    assert line_rank_device(ATB[0]) == (1, None)
    assert line_rank_device(ATB[3]) == (None, None)  # "rank: 1" alone is any rank a line talks about
