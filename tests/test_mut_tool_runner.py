"""``agent.core.tool_runner``: exact messages, boundaries and environment (bench/mutation.py).

bench/mutation.py runs this module's mutants inside a PID namespace: a mutant of the kill path
can signal any process it sees.
"""

from __future__ import annotations

import contextlib
import os
import stat
import subprocess
import sys
import threading
import time
from pathlib import Path

import psutil
import pytest

from agent.core import tool_runner
from agent.core.tool_runner import (
    RUN_ID_ENV,
    RunResult,
    ToolFailed,
    ToolMissing,
    ToolOutputTooLarge,
    ToolTimeout,
    resolve_tool,
    run_tool,
)


def _script(tmp_path: Path, name: str, body: str, *, executable: bool = True) -> str:
    path = tmp_path / name
    path.write_text("#!/bin/sh\n" + body)
    if executable:
        path.chmod(path.stat().st_mode | stat.S_IXUSR)
    else:
        path.chmod(0o644)
    return str(path)


def test_tool_missing_lists_where_it_looked() -> None:
    error = ToolMissing("npu-smi", ["PATH", "/opt/a"])
    assert str(error) == "npu-smi: not found (looked in: PATH, /opt/a)"
    assert (error.name, error.searched) == ("npu-smi", ("PATH", "/opt/a"))


def test_tool_timeout_message_and_fields() -> None:
    error = ToolTimeout(["/usr/bin/npu-smi", "info"], 2.5, "partial")
    assert str(error) == "/usr/bin/npu-smi: no answer within 2.5s (killed)"
    assert (error.argv, error.timeout_s, error.partial_stdout) == (("/usr/bin/npu-smi", "info"), 2.5, "partial")


def _result(stdout: str, stderr: str, returncode: int = 3) -> RunResult:
    return RunResult(("/usr/local/bin/npu-smi", "info"), returncode, stdout, stderr, 0.1, False)


def test_tool_failed_names_the_tool_and_the_last_three_lines_of_stderr() -> None:
    error = ToolFailed(_result("out\n", "one\ntwo\nthree\nfour\n\n"))
    assert str(error) == "npu-smi exited 3: two / three / four"
    assert error.result.returncode == 3


def test_tool_failed_falls_back_to_stdout_then_to_no_output() -> None:
    assert str(ToolFailed(_result("only stdout\n", ""))) == "npu-smi exited 3: only stdout"
    assert str(ToolFailed(_result("  \n", "\n"))) == "npu-smi exited 3: no output"


def test_resolve_refuses_a_configured_file_that_is_not_executable(tmp_path: Path) -> None:
    plain = _script(tmp_path, "npu-smi", "", executable=False)
    with pytest.raises(ToolMissing) as info:
        resolve_tool("npu-smi", plain, [], str(tmp_path / "nowhere"))
    assert info.value.searched == (plain,)
    assert str(info.value) == f"npu-smi: not found (looked in: {plain})"
    with pytest.raises(ToolMissing):
        resolve_tool("npu-smi", str(tmp_path), [], str(tmp_path))  # a directory is no tool


def test_resolve_skips_standard_dirs_without_an_executable_tool(tmp_path: Path) -> None:
    empty, plain, good = tmp_path / "empty", tmp_path / "plain", tmp_path / "good"
    for directory in (empty, plain, good):
        directory.mkdir()
    _script(plain, "npu-smi", "", executable=False)
    (good / "npu-smi").mkdir()  # a directory named like the tool is skipped too
    best = tmp_path / "best"
    best.mkdir()
    tool = _script(best, "npu-smi", "")
    dirs = [str(empty), str(plain), str(good), str(best)]
    assert resolve_tool("npu-smi", None, dirs, str(tmp_path / "nowhere")) == tool
    with pytest.raises(ToolMissing) as info:
        resolve_tool("npu-smi", None, dirs[:3], str(tmp_path / "nowhere"))
    assert info.value.searched == ("PATH", *dirs[:3])


def test_resolve_uses_the_process_path_by_default(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    tool = _script(tmp_path, "npu-smi", "")
    monkeypatch.setenv("PATH", str(tmp_path))
    assert resolve_tool("npu-smi", None, []) == tool
    assert resolve_tool("npu-smi", "", []) == tool  # an empty configured path means "not configured"


def test_tool_env_sets_c_locale_lets_extra_win_but_not_over_the_run_id(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LANG", "de_DE.UTF-8")
    monkeypatch.setenv("NPUWATCH_MUT_MARK", "kept")
    env = tool_runner._tool_env({"LC_ALL": "POSIX", RUN_ID_ENV: "forged", "EXTRA": "1"}, "run-1")
    assert env["LANG"] == "C"
    assert env["LC_ALL"] == "POSIX"
    assert env["EXTRA"] == "1"
    assert env["NPUWATCH_MUT_MARK"] == "kept"
    assert env[RUN_ID_ENV] == "run-1"
    assert tool_runner._tool_env(None, "run-2")["LC_ALL"] == "C"


def test_the_tool_sees_its_run_id_and_extra_env(tmp_path: Path) -> None:
    tool = _script(tmp_path, "env", 'echo "$NPUWATCH_TOOL_RUN|$EXTRA"\n')
    out = run_tool([tool], timeout_s=5, env={"EXTRA": "x"}).stdout.strip()
    run_id, extra = out.split("|")
    assert extra == "x"
    assert run_id.count("-") == 2 and run_id.split("-")[0].isdigit()
    assert len(run_id.split("-")[2]) == 8  # 4 random bytes, hex


def test_output_exactly_at_the_limit_is_not_truncated(tmp_path: Path) -> None:
    tool = _script(tmp_path, "exact", "printf abc >&2\nprintf 0123456789\n")
    result = run_tool([tool], timeout_s=5, max_output_bytes=10)
    assert (result.stdout, result.stderr, result.truncated) == ("0123456789", "abc", False)
    over = run_tool([tool], timeout_s=5, max_output_bytes=9, check=False)
    assert (over.stdout, over.stderr, over.truncated) == ("012345678", "abc", True)


def test_a_limit_hit_on_stderr_alone_truncates(tmp_path: Path) -> None:
    tool = _script(tmp_path, "noisy", "printf ok\nhead -c 100 /dev/zero | tr '\\0' e >&2\n")
    result = run_tool([tool], timeout_s=5, max_output_bytes=50, check=False)
    assert result.stdout == "ok"
    assert result.stderr == "e" * 50
    assert result.truncated


def test_a_big_output_in_many_chunks_is_kept_whole(tmp_path: Path) -> None:
    tool = _script(tmp_path, "big", f"{sys.executable} -c \"print('x' * 300000)\"\n")
    result = run_tool([tool], timeout_s=10)
    assert result.stdout == "x" * 300000 + "\n"
    assert not result.truncated


def test_a_result_carries_argv_returncode_and_decoded_output(tmp_path: Path) -> None:
    tool = _script(tmp_path, "ok", "printf '\\377ok'\nprintf 'w\\n' >&2\nexit 0\n")
    result = run_tool([tool, "-x"], timeout_s=5)
    assert result.argv == (tool, "-x")
    assert result.returncode == 0
    assert result.stdout == "\ufffdok"
    assert result.stderr == "w\n"
    assert 0 <= result.duration_s < 5


def test_timeout_keeps_the_partial_stdout(tmp_path: Path) -> None:
    tool = _script(tmp_path, "slow", "printf 'first line'\nexec sleep 30\n")
    with pytest.raises(ToolTimeout) as info:
        run_tool([tool], timeout_s=0.8)
    assert info.value.partial_stdout == "first line"
    assert info.value.timeout_s == 0.8


def test_empty_argv_is_refused() -> None:
    with pytest.raises(ValueError, match=r"^empty argv$"):
        run_tool([], timeout_s=1)


def test_a_tool_without_execute_permission_is_missing(tmp_path: Path) -> None:
    plain = _script(tmp_path, "plain", "", executable=False)
    with pytest.raises(ToolMissing) as info:
        run_tool([plain], timeout_s=1)
    assert info.value.searched == (f"{plain} (not executable)",)
    assert info.value.name == plain
    with pytest.raises(ToolMissing) as missing:
        run_tool([str(tmp_path / "absent")], timeout_s=1)
    assert missing.value.searched == (str(tmp_path / "absent"),)
    assert missing.value.name == str(tmp_path / "absent")


def test_no_run_is_left_registered_after_it_ends(tmp_path: Path) -> None:
    tool = _script(tmp_path, "fail", "exit 1\n")
    with pytest.raises(ToolFailed):
        run_tool([tool], timeout_s=5)
    run_tool(["true"], timeout_s=5)
    assert tool_runner._running == {}
    assert tool_runner.kill_running_tools() == 0


def _sleeper(marker: str) -> str:
    """A 300 s sleep whose argv carries ``marker`` (where psutil can see it), with no environment."""
    return f'env -i "{sys.executable}" -c "import time; time.sleep(300)" {marker}'


def _alive(marker: str) -> list[psutil.Process]:
    found = []
    for process in psutil.process_iter(["cmdline", "status"]):
        with contextlib.suppress(psutil.Error):
            if marker in " ".join(process.info["cmdline"] or []) and process.status() != psutil.STATUS_ZOMBIE:
                found.append(process)
    return found


def _gone(marker: str, within_s: float = 5.0) -> bool:
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        if not _alive(marker):
            return True
        time.sleep(0.05)
    return False


def test_the_over_cap_message_is_exact(tmp_path: Path) -> None:
    tool = _script(tmp_path, "flood", "head -c 100000 /dev/zero\n")
    with pytest.raises(ToolOutputTooLarge) as info:
        run_tool([tool], timeout_s=5, max_output_bytes=100)
    assert str(info.value) == "flood: more than 100 bytes of output on one stream (killed; output not used)"


def test_a_tool_that_closes_its_pipes_and_hangs_is_a_timeout_on_time(tmp_path: Path) -> None:
    """The pipes end at once; the wait for the process itself must still end at the deadline."""
    tool = _script(tmp_path, "mute", "exec >&- 2>&-\nexec sleep 30\n")
    started = time.monotonic()
    with pytest.raises(ToolTimeout):
        run_tool([tool], timeout_s=0.2)
    assert time.monotonic() - started < 0.9


def test_a_tool_that_answers_late_is_read_to_the_end(tmp_path: Path) -> None:
    tool = _script(tmp_path, "late", "sleep 0.6\necho done\n")
    assert run_tool([tool], timeout_s=10).stdout == "done\n"


def test_undecodable_stderr_is_replaced_not_raised(tmp_path: Path) -> None:
    tool = _script(tmp_path, "bytes", "printf 'ok'\nprintf 'bad \\377 byte' >&2\n")
    result = run_tool([tool], timeout_s=5)
    assert (result.stdout, result.stderr) == ("ok", "bad \ufffd byte")


def test_the_tool_leads_its_own_session(tmp_path: Path) -> None:
    tool = _script(tmp_path, "session", f'exec "{sys.executable}" -c "import os; print(os.getsid(0) == os.getpid())"\n')
    assert run_tool([tool], timeout_s=10).stdout == "True\n"


def test_the_tool_inherits_no_descriptor_of_the_agent(tmp_path: Path) -> None:
    read_end, write_end = os.pipe()
    os.set_inheritable(write_end, True)
    try:
        tool = _script(tmp_path, "fds", "ls /proc/self/fd\n")
        fds = {int(fd) for fd in run_tool([tool], timeout_s=5).stdout.split()}
    finally:
        os.close(read_end)
        os.close(write_end)
    assert write_end not in fds


def test_the_tool_reads_an_empty_stdin_not_the_agents(tmp_path: Path) -> None:
    read_end, write_end = os.pipe()
    saved = os.dup(0)
    os.dup2(read_end, 0)
    try:
        tool = _script(tmp_path, "stdin", "readlink /proc/self/fd/0\n")
        stdin = run_tool([tool], timeout_s=5).stdout.strip()
    finally:
        os.dup2(saved, 0)
        for fd in (saved, read_end, write_end):
            os.close(fd)
    assert stdin == "/dev/null"


def test_a_timeout_kills_only_its_own_tool(tmp_path: Path) -> None:
    """A tool timing out beside another one running: the other still answers."""
    slow = _script(tmp_path, "slow-ok", "sleep 1.5\necho ok\n")
    results: list[str] = []
    worker = threading.Thread(target=lambda: results.append(run_tool([slow], timeout_s=20).stdout))
    worker.start()
    time.sleep(0.3)
    with pytest.raises(ToolTimeout):
        run_tool([_script(tmp_path, "hang", "exec sleep 30\n")], timeout_s=0.3)
    worker.join(20)
    assert results == ["ok\n"]


def test_a_deep_descendant_in_its_own_session_without_the_run_id_is_killed(tmp_path: Path) -> None:
    """Neither in the group nor carrying the run id: only the walk down the process tree finds it."""
    marker = f"npuwatch-mut-deep-{os.getpid()}"
    tool = _script(tmp_path, "deep", f"sh -c 'setsid {_sleeper(marker)} & wait' &\nwait\n")
    with pytest.raises(ToolTimeout):
        run_tool([tool], timeout_s=1.0)
    assert _gone(marker), _alive(marker)


def test_kill_tree_of_a_finished_tool_is_quiet(tmp_path: Path) -> None:
    proc = subprocess.Popen(["true"], start_new_session=True)
    proc.wait()
    assert tool_runner.kill_tree(proc, "no-such-run") == 0
