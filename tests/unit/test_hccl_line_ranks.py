"""The rank and device a log line is printed by, from the prefixes and fields real jobs carry (issue 40): torch's
``[rank9]:`` and ``[Rank 9]``, vLLM's ``(VllmWorker rank=9 pid=..)``, torch_npu's ``RankID:9`` / ``rank_id=9`` and
``Device:3``, the runtime's ``device(chipId:3, dieId:0)``; triage places a failure by them when no communicator
fact does."""

from __future__ import annotations

import pytest

from agent.triage.logs import LogReader
from collectors.hccl.classify import StreamClassifier
from collectors.hccl.lines import line_rank_device, split_prefixes


@pytest.mark.parametrize(("line", "rank", "device"), [
    ("[rank9]:[E324 13:00:25.428029551 ProcessGroupHCCL.cpp:574] [Rank 9] Watchdog caught", 9, None),
    ("[Rank 9] Watchdog caught collective operation timeout", 9, None),
    ("[ERROR] 2025-06-03-08:15:42 (PID:52001, Device:5, RankID:13) ERR01005 OPS internal error", 13, 5),
    ("(VllmWorker rank=3 pid=1234) ERROR 03-02 10:40:00 [worker.py:1] EL0004: out of memory", 3, None),
    ("EZ9999: [PID: 1] The error from device(chipId:5, dieId:0), serial number is 3", None, 5),
    ("EZ9999: [PID: 1] An error occurs on the device(chipId:2, dieId:1), the serial number is 3", None, 2),
    ("EZ9999: [PID: 1] The error from device(6), serial number is 17, there is an error of aicore", None, 6),
    ("HcclCommInitRootInfo failed, rank_id=4", 4, None),
    # a peer the line names is not the rank that printed it
    ("Task run failed, taskType[Notify Wait], remote rank:[5], remoteRankId[5]", None, None),
])
def test_the_rank_and_device_a_line_is_printed_by(line: str, rank: int | None, device: int | None) -> None:
    assert line_rank_device(line) == (rank, device)


def test_a_vllm_worker_prefix_is_stripped_like_rays() -> None:
    assert split_prefixes("(VllmWorker rank=3 pid=1234) EL0004: out of memory") == ("EL0004: out of memory", False)


def test_events_carry_the_rank_and_device_of_their_line() -> None:
    lines = ["[rank9]: RuntimeError: E39009: [PID: 7] 2026-03-02-10:40:00.000.000 Failed to connect the device.",
             "[ERROR] 2026-03-02-10:50:00 (PID:7, Device:3, RankID:9) ERR01005 OPS internal error"]
    events, _ = StreamClassifier().feed_lines(lines)
    assert [(e.code, e.rank, e.device) for e in events] == [("E39009", 9, None), ("ERR01005", 9, 3)]


def test_triage_places_a_failure_by_the_rank_its_line_prints() -> None:
    reader = LogReader("node-x", "job.log")
    reader.feed(1, "[rank9]: RuntimeError: EI0002: [PID: 7] 2026-03-02-10:40:00.000.000 The wait execution of the "
                   "Notify register times out. Reason: the remote rank did not respond.")
    reader.feed(2, "[ERROR] 2026-03-02-10:50:00 (PID:8, Device:3, RankID:11) EI0006: Getting socket times out.")
    failures = reader.finish().failures
    assert [(f.code, f.rank, f.npu) for f in failures] == [("EI0002", 9, None), ("EI0006", 11, 3)]
