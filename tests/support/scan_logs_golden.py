"""Golden text of ``npuwatch scan-logs``: a few log directories, plain and coloured, compared by
tests/unit/test_scan_logs_golden.py.

Each case writes its logs into ``logs/`` of a scratch directory, scans ``logs`` from there (so the
paths it prints are relative) and renders in UTC. ``errors`` is one node of a job that hung: two
ranks' plogs (written by the demo's plog writer, at fixed times) time out in an AllReduce and
blame the same peer, one after a RoCE completion error towards it; a healthy process's log sits
beside them. Its plain text is the README's example.

Tests only compare. After a deliberate change to the classifier, the scan or the rendering,
regenerate with ``python -m tests.support.scan_logs_golden`` and review the diff like any other change.
"""

from __future__ import annotations

import io
import os
import shutil
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from agent.demo.plog import HcclTimeout, RoceCqe, append_plog, hccl_timeout_lines, roce_cqe_lines
from agent.diagnose import scan_logs
from tests.support import paths
from tests.support.golden import report_rewritten, write_if_changed

GOLDEN = paths.FIXTURES / "scan_logs"
FIXTURES = paths.FIXTURES / "hccl_logs"
T0 = 1_761_301_862.0  # 2025-10-24 10:31:02 UTC: when the collective timed out
GROUP = "29.1.0.10%enp_60000_0_1761298262000000"
PEER_IP, PEER_RANK = "29.1.5.15", 13


def _copy(logs: Path, fixture: str) -> None:
    target = logs / fixture
    shutil.copyfile(FIXTURES / fixture, target)
    os.utime(target, (T0, T0))


def errors(logs: Path) -> None:
    for rank, device, pid in ((10, 2, 3_325_934), (11, 3, 3_325_951)):
        if device == 2:
            append_plog(logs, pid, T0 - 95, roce_cqe_lines(RoceCqe(device=device, at=T0 - 95, pid=pid,
                                                                   local_ip=f"29.1.{device}.{10 + device}",
                                                                   peer_ip=PEER_IP, peer_device=5)))
        append_plog(logs, pid, T0, hccl_timeout_lines(HcclTimeout(
            group=GROUP, rank=rank, rank_size=16, device=device, at=T0 + rank - 10, pid=pid,
            local_ip=f"29.1.{device}.{10 + device}", peer_ips=(PEER_IP,), peer_ranks=(PEER_RANK,),
            peer_state="lost")))
    _copy(logs, "clean.log")


def clean(logs: Path) -> None:
    _copy(logs, "clean.log")


def nothing_read(logs: Path) -> None:
    """An empty directory."""


CASES: dict[str, Callable[[Path], None]] = {"errors": errors, "clean": clean, "nothing_read": nothing_read}


def run(name: str, root: Path, color: bool) -> tuple[int, str, str]:
    """The case's exit status, stdout and stderr, scanned from ``root`` in UTC.

    The caller restores the zone (``TZ``) and nothing else: the working directory is put back here.
    """
    os.environ["TZ"] = "UTC"
    time.tzset()
    logs = root / "logs"
    logs.mkdir(exist_ok=True)
    CASES[name](logs)
    out, err = io.StringIO(), io.StringIO()
    before = os.getcwd()
    os.chdir(root)
    try:
        code = scan_logs.main(["logs"], False, out=out, err=err, color="always" if color else "never")
    finally:
        os.chdir(before)
    return code, out.getvalue(), err.getvalue()


def regenerate() -> list[Path]:
    changed: list[Path] = []
    for name in CASES:
        for suffix, color in ((".txt", False), (".color.txt", True)):
            with tempfile.TemporaryDirectory() as tmp:
                _, text, _ = run(name, Path(tmp), color)
            golden = GOLDEN / f"{name}{suffix}"
            write_if_changed(golden, text, changed)
    return changed


if __name__ == "__main__":
    report_rewritten(regenerate())
