"""One real EI0002 failure as two files show it: torch_npu's screen capture (the job log) and the plog block of
the same process (rank 0, PID 7277, same group and time), for the tests that count it once."""

from __future__ import annotations

from pathlib import Path

from tests.support.paths import CORPUS, corpus_file

SCREEN = CORPUS / "tools" / (
    "hccl-log_EI0002-torch_npu-507048-ClusterExceptionLocation__910B__src-Ascend-pytorch-docs-troubleshooting.txt")
GROUP = "90.90.92.240%enp189s0f0_60000_0_1732766162316022"
PLOG = (
    "[ERROR] HCCL(7277,python3):2024-11-28-11:59:30.645.600 [task_exception_handler.cc:908] [7277][TaskExecStage]"
    f"[Timeout][Host]Task run failed, base information is streamID:[2282987520], taskID[5], tag[AllReduce_{GROUP}], "
    "AlgType(level 0-1-2):[fullmesh-ring-ring].\n"
    "[ERROR] HCCL(7277,python3):2024-11-28-11:59:30.645.610 [task_exception_handler.cc:771] [7277][TaskExecStage]"
    f"[Timeout][Host]Task run failed, groupRank information is group:[{GROUP}], user define information[], "
    "rankSize[2], rankId[0].\n"
)


def write_node(node: Path, job_log: str | None = None) -> Path:
    """``node``/plog/ with rank 0's block and ``node``/job/train.log with the screen (or ``job_log``)."""
    (node / "plog").mkdir(parents=True)
    (node / "plog" / "plog-7277_20241128115930000.log").write_text(PLOG)
    (node / "job").mkdir()
    (node / "job" / "train.log").write_text(corpus_file(SCREEN).read_text() if job_log is None else job_log)
    return node
