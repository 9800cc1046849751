"""The tool runner on real subprocesses: timeouts kill the whole group, no zombies remain."""

from __future__ import annotations

import contextlib
import os
import selectors
import stat
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import psutil
import pytest

from agent.core import tool_runner
from agent.core.tool_runner import (
    ToolCannotRun,
    ToolFailed,
    ToolMissing,
    ToolOutputTooLarge,
    ToolTimeout,
    kill_running_tools,
    resolve_tool,
    run_tool,
)
from tests.support.scripts import shell_script as _script


def _descendants_with(marker: str) -> list[psutil.Process]:
    found = []
    for proc in psutil.process_iter(["cmdline", "status"]):
        try:
            if marker in " ".join(proc.info["cmdline"] or []):
                found.append(proc)
        except psutil.Error:
            continue
    return found


def test_runs_argv_without_a_shell(tmp_path: Path) -> None:
    result = run_tool(["printf", "%s|", "a b", "$HOME;rm"], timeout_s=5)
    assert result.stdout == "a b|$HOME;rm|"
    assert result.returncode == 0
    assert result.duration_s >= 0


def test_sets_c_locale(tmp_path: Path) -> None:
    tool = _script(tmp_path, "locale", 'echo "$LANG $LC_ALL"\n')
    assert run_tool([tool], timeout_s=5).stdout.strip() == "C C"


def _sleeper(marker: str) -> str:
    """A command line that sleeps 300 s and carries ``marker`` in its argv, where psutil can see it."""
    return f'"{sys.executable}" -c "import time; time.sleep(300)" {marker}'


def _python_tool(tmp_path: Path, name: str, body: str) -> str:
    path = tmp_path / name
    path.write_text(f"#!{sys.executable}\n" + body)
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return str(path)


def _alive_with(marker: str) -> list[psutil.Process]:
    return [p for p in _descendants_with(marker) if p.status() != psutil.STATUS_ZOMBIE]


def test_the_marker_check_sees_a_live_sleeper(tmp_path: Path) -> None:
    """The orphan checks below can fail: a sleeper started with a marker is found by it."""
    marker = f"npuwatch-seen-{os.getpid()}"
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)", marker])
    try:
        assert wait_until(lambda: bool(_alive_with(marker)))
    finally:
        proc.kill()
        proc.wait()


def wait_until(condition: Callable[[], bool], timeout: float = 5.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.05)
    return condition()


def test_timeout_kills_the_process_group_and_reaps(tmp_path: Path) -> None:
    marker = f"npuwatch-hang-{os.getpid()}"
    # A child that forks a grandchild in the background and then hangs itself: both must die.
    wrapper = _script(tmp_path, "wrapper", f"{_sleeper(marker)} &\n{_sleeper(marker)}\n")
    started = time.monotonic()
    with pytest.raises(ToolTimeout) as info:
        run_tool([wrapper], timeout_s=0.3)
    assert time.monotonic() - started < 3
    assert info.value.timeout_s == 0.3
    assert wait_until(lambda: not _alive_with(marker)), _alive_with(marker)
    assert not [c for c in psutil.Process().children(recursive=True) if c.status() == psutil.STATUS_ZOMBIE]


def test_timeout_kills_a_grandchild_that_escaped_with_setsid(tmp_path: Path) -> None:
    """Double fork + setsid: the grandchild is in no group and no tree of ours, re-parented to init."""
    marker = f"npuwatch-escape-{os.getpid()}"
    tool = _python_tool(tmp_path, "escape", f"""
import os, sys, time
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        os.execv(sys.executable, [sys.executable, "-c", "import time; time.sleep(300)", "{marker}"])
    os._exit(0)
time.sleep(300)
""")
    with pytest.raises(ToolTimeout):
        run_tool([tool], timeout_s=1.0)
    assert wait_until(lambda: not _alive_with(marker)), _alive_with(marker)


def test_a_grandchild_holding_stdout_does_not_turn_a_result_into_a_timeout(tmp_path: Path) -> None:
    marker = f"npuwatch-holder-{os.getpid()}"
    tool = _script(tmp_path, "holder", f"echo answer\n{_sleeper(marker)} &\nexit 0\n")
    started = time.monotonic()
    result = run_tool([tool], timeout_s=10)
    assert result.stdout.strip() == "answer"
    assert result.returncode == 0
    assert time.monotonic() - started < 3
    assert wait_until(lambda: not _alive_with(marker)), _alive_with(marker)


def test_fifty_hangs_leave_no_process_behind(tmp_path: Path) -> None:
    marker = f"npuwatch-fifty-{os.getpid()}"
    tool = _script(tmp_path, "hang", f"exec {_sleeper(marker)}\n")
    for _ in range(50):
        with pytest.raises(ToolTimeout):
            run_tool([tool], timeout_s=0.05)
    assert wait_until(lambda: not _alive_with(marker)), _alive_with(marker)


def test_kill_running_tools_ends_a_hung_tool_at_once(tmp_path: Path) -> None:
    marker = f"npuwatch-stop-{os.getpid()}"
    tool = _script(tmp_path, "hang", f"{_sleeper(marker)}\n")
    outcome: list[BaseException] = []

    def call() -> None:
        try:
            run_tool([tool], timeout_s=900)
        except BaseException as exc:
            outcome.append(exc)

    thread = threading.Thread(target=call)
    thread.start()
    assert wait_until(lambda: bool(_alive_with(marker)))
    started = time.monotonic()
    assert kill_running_tools() == 1
    thread.join(5)
    assert not thread.is_alive()
    assert time.monotonic() - started < 3
    assert outcome and isinstance(outcome[0], ToolFailed)
    assert wait_until(lambda: not _alive_with(marker)), _alive_with(marker)


def test_non_zero_exit_is_tool_failed_with_stderr_tail(tmp_path: Path) -> None:
    tool = _script(tmp_path, "crash", "echo 'driver not loaded' >&2\nexit 3\n")
    with pytest.raises(ToolFailed) as info:
        run_tool([tool], timeout_s=5)
    assert info.value.result.returncode == 3
    assert "driver not loaded" in str(info.value)
    assert run_tool([tool], timeout_s=5, check=False).returncode == 3


def test_output_is_bounded(tmp_path: Path) -> None:
    tool = _script(tmp_path, "flood", "head -c 5000000 /dev/zero\n")
    result = run_tool([tool], timeout_s=10, max_output_bytes=1000, check=False)
    assert len(result.stdout) == 1000
    assert result.truncated


def test_a_tool_over_the_output_cap_is_killed_at_once_and_its_output_refused(tmp_path: Path) -> None:
    """Reading a flood to its end costs CPU and memory for output nobody will use: stop at the cap."""
    marker = f"flood-then-hang-{os.getpid()}"
    tool = _script(tmp_path, "flood", f"head -c 200000 /dev/zero\nexec {_sleeper(marker)}\n")
    started = time.monotonic()
    with pytest.raises(ToolOutputTooLarge, match="more than 1000 bytes of output") as info:
        run_tool([tool], timeout_s=20, max_output_bytes=1000)
    assert time.monotonic() - started < 10  # killed at the cap, not at the 20 s timeout
    assert isinstance(info.value, ToolFailed)  # callers that catch ToolFailed still see a failure
    assert info.value.result.truncated and len(info.value.result.stdout) == 1000
    assert wait_until(lambda: not _alive_with(marker)), _alive_with(marker)


def test_missing_binary_is_a_typed_error(tmp_path: Path) -> None:
    with pytest.raises(ToolMissing):
        run_tool([str(tmp_path / "nope")], timeout_s=1)
    with pytest.raises(ToolMissing) as info:
        resolve_tool("npu-smi", search_dirs=[str(tmp_path)], path_env=str(tmp_path))
    assert "npu-smi" in str(info.value) and str(tmp_path) in str(info.value)


def test_a_tool_whose_interpreter_is_gone_exists_but_cannot_be_executed(tmp_path: Path) -> None:
    wrapper = tmp_path / "npu-smi"
    wrapper.write_text("#!/nonexistent/venv/bin/python3 -IS\nprint('hello')\n")
    wrapper.chmod(0o755)
    with pytest.raises(ToolCannotRun) as info:
        run_tool([str(wrapper), "info"], timeout_s=5)
    assert str(info.value) == (f"{wrapper}: exists but cannot be executed "
                               "(its interpreter /nonexistent/venv/bin/python3 is missing)")
    assert isinstance(info.value, ToolMissing)  # counted as a missing tool, as before
    wrapper.chmod(0o644)
    with pytest.raises(ToolCannotRun, match="not executable"):
        run_tool([str(wrapper), "info"], timeout_s=5)


def _tool_script(tmp_path: Path, name: str, body: str, *, executable: bool = True) -> str:
    path = tmp_path / name
    path.write_text("#!/bin/sh\n" + body)
    if executable:
        path.chmod(path.stat().st_mode | stat.S_IXUSR)
    else:
        path.chmod(0o644)
    return str(path)


def test_the_tool_sees_its_run_id_and_extra_env(tmp_path: Path) -> None:
    tool = _tool_script(tmp_path, "env", 'echo "$NPUWATCH_TOOL_RUN|$EXTRA"\n')
    out = run_tool([tool], timeout_s=5, env={"EXTRA": "x"}).stdout.strip()
    run_id, extra = out.split("|")
    assert extra == "x"
    assert run_id.count("-") == 2 and run_id.split("-")[0].isdigit()
    assert len(run_id.split("-")[2]) == 8  # 4 random bytes, hex


def test_output_exactly_at_the_limit_is_not_truncated(tmp_path: Path) -> None:
    tool = _tool_script(tmp_path, "exact", "printf abc >&2\nprintf 0123456789\n")
    result = run_tool([tool], timeout_s=5, max_output_bytes=10)
    assert (result.stdout, result.stderr, result.truncated) == ("0123456789", "abc", False)
    over = run_tool([tool], timeout_s=5, max_output_bytes=9, check=False)
    assert (over.stdout, over.stderr, over.truncated) == ("012345678", "abc", True)


def test_a_limit_hit_on_stderr_alone_truncates(tmp_path: Path) -> None:
    tool = _tool_script(tmp_path, "noisy", "printf ok\nhead -c 100 /dev/zero | tr '\\0' e >&2\n")
    result = run_tool([tool], timeout_s=5, max_output_bytes=50, check=False)
    assert result.stdout == "ok"
    assert result.stderr == "e" * 50
    assert result.truncated


def test_a_big_output_in_many_chunks_is_kept_whole(tmp_path: Path) -> None:
    tool = _tool_script(tmp_path, "big", f"{sys.executable} -c \"print('x' * 300000)\"\n")
    result = run_tool([tool], timeout_s=10)
    assert result.stdout == "x" * 300000 + "\n"
    assert not result.truncated


def test_a_result_carries_argv_returncode_and_decoded_output(tmp_path: Path) -> None:
    tool = _tool_script(tmp_path, "ok", "printf '\\377ok'\nprintf 'w\\n' >&2\nexit 0\n")
    result = run_tool([tool, "-x"], timeout_s=5)
    assert result.argv == (tool, "-x")
    assert result.returncode == 0
    assert result.stdout == "\ufffdok"
    assert result.stderr == "w\n"
    assert 0 <= result.duration_s < 5


def test_timeout_keeps_the_partial_stdout(tmp_path: Path) -> None:
    tool = _tool_script(tmp_path, "slow", "printf 'first line'\nexec sleep 30\n")
    with pytest.raises(ToolTimeout) as info:
        run_tool([tool], timeout_s=0.8)
    assert info.value.partial_stdout == "first line"
    assert info.value.timeout_s == 0.8


def test_a_tool_without_execute_permission_cannot_be_executed(tmp_path: Path) -> None:
    plain = _tool_script(tmp_path, "plain", "", executable=False)
    with pytest.raises(ToolCannotRun) as info:
        run_tool([plain], timeout_s=1)
    assert info.value.searched == (plain,)
    assert info.value.name == plain
    assert "exists but cannot be executed (not executable" in str(info.value)
    with pytest.raises(ToolMissing) as missing:
        run_tool([str(tmp_path / "absent")], timeout_s=1)
    assert missing.value.searched == (str(tmp_path / "absent"),)
    assert missing.value.name == str(tmp_path / "absent")


def test_no_run_is_left_registered_after_it_ends(tmp_path: Path) -> None:
    tool = _tool_script(tmp_path, "fail", "exit 1\n")
    with pytest.raises(ToolFailed):
        run_tool([tool], timeout_s=5)
    run_tool(["true"], timeout_s=5)
    assert tool_runner._running == {}
    assert tool_runner.kill_running_tools() == 0


def _bare_sleeper(marker: str) -> str:
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
    tool = _tool_script(tmp_path, "flood", "head -c 100000 /dev/zero\n")
    with pytest.raises(ToolOutputTooLarge) as info:
        run_tool([tool], timeout_s=5, max_output_bytes=100)
    assert str(info.value) == "flood: more than 100 bytes of output on one stream (killed; output not used)"


def test_a_tool_that_closes_its_pipes_and_hangs_is_a_timeout_on_time(tmp_path: Path) -> None:
    """The pipes end at once; the wait for the process itself must still end at the deadline."""
    tool = _tool_script(tmp_path, "mute", "exec >&- 2>&-\nexec sleep 30\n")
    started = time.monotonic()
    with pytest.raises(ToolTimeout):
        run_tool([tool], timeout_s=0.2)
    assert time.monotonic() - started < 0.9


def test_a_tool_that_answers_late_is_read_to_the_end(tmp_path: Path) -> None:
    tool = _tool_script(tmp_path, "late", "sleep 0.6\necho done\n")
    assert run_tool([tool], timeout_s=10).stdout == "done\n"


def test_undecodable_stderr_is_replaced_not_raised(tmp_path: Path) -> None:
    tool = _tool_script(tmp_path, "bytes", "printf 'ok'\nprintf 'bad \\377 byte' >&2\n")
    result = run_tool([tool], timeout_s=5)
    assert (result.stdout, result.stderr) == ("ok", "bad \ufffd byte")


def test_the_tool_leads_its_own_session(tmp_path: Path) -> None:
    tool = _tool_script(
        tmp_path, "session", f'exec "{sys.executable}" -c "import os; print(os.getsid(0) == os.getpid())"\n')
    assert run_tool([tool], timeout_s=10).stdout == "True\n"


def test_the_tool_inherits_no_descriptor_of_the_agent(tmp_path: Path) -> None:
    read_end, write_end = os.pipe()
    os.set_inheritable(write_end, True)
    try:
        tool = _tool_script(tmp_path, "fds", "ls /proc/self/fd\n")
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
        tool = _tool_script(tmp_path, "stdin", "readlink /proc/self/fd/0\n")
        stdin = run_tool([tool], timeout_s=5).stdout.strip()
    finally:
        os.dup2(saved, 0)
        for fd in (saved, read_end, write_end):
            os.close(fd)
    assert stdin == "/dev/null"


def test_a_timeout_kills_only_its_own_tool(tmp_path: Path) -> None:
    """A tool timing out beside another one running: the other still answers."""
    slow = _tool_script(tmp_path, "slow-ok", "sleep 1.5\necho ok\n")
    results: list[str] = []
    worker = threading.Thread(target=lambda: results.append(run_tool([slow], timeout_s=20).stdout))
    worker.start()
    time.sleep(0.3)
    with pytest.raises(ToolTimeout):
        run_tool([_tool_script(tmp_path, "hang", "exec sleep 30\n")], timeout_s=0.3)
    worker.join(20)
    assert results == ["ok\n"]


def test_a_deep_descendant_in_its_own_session_without_the_run_id_is_killed(tmp_path: Path) -> None:
    """Neither in the group nor carrying the run id: only the walk down the process tree finds it."""
    marker = f"npuwatch-mut-deep-{os.getpid()}"
    tool = _tool_script(tmp_path, "deep", f"sh -c 'setsid {_bare_sleeper(marker)} & wait' &\nwait\n")
    with pytest.raises(ToolTimeout):
        run_tool([tool], timeout_s=1.0)
    assert _gone(marker), _alive(marker)


def test_kill_tree_of_a_finished_tool_is_quiet(tmp_path: Path) -> None:
    proc = subprocess.Popen(["true"], start_new_session=True)
    proc.wait()
    assert tool_runner.kill_tree(proc, "no-such-run") == 0


@pytest.fixture(params=["pidfd", "polled"])
def exit_watch(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Both ways the runner learns that the tool exited: a pidfd in its wait, or (no pidfd_open) a poll each turn."""
    if request.param == "polled":
        monkeypatch.delattr(os, "pidfd_open", raising=False)
    elif not hasattr(os, "pidfd_open"):
        pytest.fail("this Python has no os.pidfd_open: the pidfd path is not tested here")
    return str(request.param)


def test_either_exit_watch_reads_the_answer_and_the_exit_status(tmp_path: Path, exit_watch: str) -> None:
    tool = _tool_script(tmp_path, "answer", "echo out\necho err >&2\nexit 3\n")
    result = run_tool([tool], timeout_s=5, check=False)
    assert (result.stdout, result.stderr, result.returncode) == ("out\n", "err\n", 3)


def test_either_exit_watch_ends_a_mute_hang_at_the_deadline(tmp_path: Path, exit_watch: str) -> None:
    tool = _tool_script(tmp_path, "mute", "exec >&- 2>&-\nexec sleep 30\n")
    started = time.monotonic()
    with pytest.raises(ToolTimeout):
        run_tool([tool], timeout_s=0.2)
    assert time.monotonic() - started < 0.9


def test_either_exit_watch_does_not_wait_for_a_grandchild_holding_stdout(tmp_path: Path, exit_watch: str) -> None:
    marker = f"npuwatch-holder-{exit_watch}-{os.getpid()}"
    tool = _script(tmp_path, "holder", f"echo answer\n{_sleeper(marker)} &\nexit 0\n")
    started = time.monotonic()
    assert run_tool([tool], timeout_s=10).stdout == "answer\n"
    assert time.monotonic() - started < 3
    assert wait_until(lambda: not _alive_with(marker)), _alive_with(marker)


def test_with_a_pidfd_a_slow_tool_wakes_the_caller_only_for_its_events(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The wait sleeps until output, exit or the deadline: no turn every 0.25 s while the tool works.

    Counted as the wait's returns from ``select``, not as the kernel's context switches of the thread: those
    also count each wait for the GIL, so a busy test process made a right wait look like a polling one."""
    if not hasattr(os, "pidfd_open"):
        pytest.fail("needs os.pidfd_open (Linux)")
    turns: list[float] = []

    class CountingSelector(selectors.PollSelector):
        def select(self, timeout: float | None = None) -> list[tuple[selectors.SelectorKey, int]]:
            ready = super().select(timeout)
            turns.append(time.monotonic())
            return ready

    monkeypatch.setattr(tool_runner.selectors, "PollSelector", CountingSelector)
    tool = _tool_script(tmp_path, "slow", "sleep 1.5\necho done\n")
    assert run_tool([tool], timeout_s=10).stdout == "done\n"
    assert 1 <= len(turns) <= 5, turns  # output, each pipe's end, exit; a 0.25 s turn made it 7 or more


def test_runs_leave_no_descriptor_open(tmp_path: Path) -> None:
    """The pipes and the exit watch's pidfd are closed after every kind of run: answer, failure, timeout."""
    ok = _tool_script(tmp_path, "ok", "echo ok\n")
    failing = _tool_script(tmp_path, "failing", "exit 2\n")
    hung = _tool_script(tmp_path, "hung", "exec sleep 30\n")
    before = len(os.listdir("/proc/self/fd"))
    for _ in range(20):
        run_tool([ok], timeout_s=5)
        with pytest.raises(ToolFailed):
            run_tool([failing], timeout_s=5)
    with pytest.raises(ToolTimeout):
        run_tool([hung], timeout_s=0.1)
    assert len(os.listdir("/proc/self/fd")) == before
