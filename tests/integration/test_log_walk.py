"""The bounded log walk: symlink loops, entry budget, unreadable directories, glob semantics."""

from __future__ import annotations

import io
import json
import logging
import os
import shutil
import tempfile
from pathlib import Path

import pytest

from collectors.hccl.collector import HcclLogCollector

EI0002 = ("[ERROR] HCCL(2111665,all_reduce_test):2025-10-24-11:18:29.499.235 [task_exception_handler.cc:908] "
          "[2111665][TaskExecStage][Timeout][Host]Task run failed, base information is streamID:[2], taskID[21]\n")


def _scan_as_nobody(root: Path) -> tuple[dict, str]:
    """Run the collector over ``root`` in a forked child that dropped to uid/gid 65534 (root bypasses modes).

    Forked after the imports, so the child needs no read access to the interpreter's own files.
    """
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child reports through the pipe
        status = 1
        try:
            os.close(read_end)
            if os.geteuid() == 0:
                os.setgid(65534)
                os.setuid(65534)
            stream = io.StringIO()
            handler = logging.StreamHandler(stream)
            handler.setFormatter(logging.Formatter("%(levelname)s %(message)s"))
            logger = logging.getLogger("collectors.hccl.collector")
            logger.addHandler(handler)
            logger.setLevel(logging.INFO)
            collector = HcclLogCollector(paths=[root], state_file=None)
            collector.collect()
            report = {"problem": collector.problem, "counts": sum(collector.counts.values()),
                      "log": stream.getvalue()}
            os.write(write_end, json.dumps(report).encode())
            status = 0
        finally:
            os._exit(status)
    os.close(write_end)
    with os.fdopen(read_end, "rb") as pipe:
        data = pipe.read()
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    report = json.loads(data)
    return report, report["log"]


@pytest.mark.skipif(os.name != "posix", reason="needs POSIX permissions")
def test_unreadable_log_directory_and_file_are_reported(tmp_path: Path) -> None:
    root = Path(tempfile.mkdtemp(prefix="npuwatch-perm-", dir="/tmp"))
    try:
        root.chmod(0o755)
        (root / "debug" / "plog").mkdir(parents=True)
        (root / "debug").chmod(0o755)
        (root / "debug" / "plog").chmod(0o755)
        readable = root / "debug" / "plog" / "plog-1_1.log"
        readable.write_text(EI0002)
        readable.chmod(0o644)
        secret = root / "debug" / "plog" / "plog-2_1.log"
        secret.write_text(EI0002)
        secret.chmod(0o000)
        closed = root / "debug" / "device-0"
        closed.mkdir()
        (closed / "device-9_1.log").write_text(EI0002)
        closed.chmod(0o000)
        report, logged = _scan_as_nobody(root)
        assert report["counts"] == 1  # the readable plog still counts
        problem = report["problem"]
        assert problem is not None and "cannot read" in problem and "HCCL errors there are not counted" in problem
        assert "permission denied" in problem.lower()
        warnings = [line for line in logged.splitlines() if line.startswith("WARNING")]
        assert any(str(secret) in line for line in warnings), logged
        assert any(str(closed) in line for line in warnings), logged
    finally:
        for path in (closed, secret):
            path.chmod(0o755)
        shutil.rmtree(root, ignore_errors=True)
