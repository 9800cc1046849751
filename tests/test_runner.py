"""The tool runner on real subprocesses: timeouts kill the whole group, no zombies remain."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import psutil
import pytest

from agent.core.tool_runner import (
    ToolFailed,
    ToolMissing,
    ToolOutputTooLarge,
    ToolTimeout,
    kill_running_tools,
    resolve_tool,
    run_tool,
)


def _script(tmp_path: Path, name: str, body: str) -> str:
    path = tmp_path / name
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return str(path)


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


def test_resolution_order_config_then_path_then_standard_dirs(tmp_path: Path) -> None:
    configured = _script(tmp_path, "configured-npu-smi", "")
    on_path = tmp_path / "path"
    on_path.mkdir()
    path_tool = _script(on_path, "npu-smi", "")
    standard = tmp_path / "std"
    standard.mkdir()
    std_tool = _script(standard, "npu-smi", "")
    assert resolve_tool("npu-smi", configured, [str(standard)], str(on_path)) == configured
    assert resolve_tool("npu-smi", None, [str(standard)], str(on_path)) == path_tool
    assert resolve_tool("npu-smi", None, [str(standard)], str(tmp_path / "empty")) == std_tool
    with pytest.raises(ToolMissing):
        resolve_tool("npu-smi", str(tmp_path / "missing"), [str(standard)], str(on_path))
