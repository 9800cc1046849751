"""The tool runner on real subprocesses: timeouts kill the whole group, no zombies remain."""

from __future__ import annotations

import os
import stat
import time
from pathlib import Path

import psutil
import pytest

from agent.core.tool_runner import ToolFailed, ToolMissing, ToolTimeout, resolve_tool, run_tool


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


def test_timeout_kills_the_process_group_and_reaps(tmp_path: Path) -> None:
    marker = f"npuwatch-hang-{os.getpid()}"
    tool = _script(tmp_path, "hang", f"sleep 300 # {marker}\n")
    # A child that forks a grandchild: both must die.
    wrapper = _script(tmp_path, "wrapper", f"{tool} &\n{tool}\n")
    started = time.monotonic()
    with pytest.raises(ToolTimeout) as info:
        run_tool([wrapper], timeout_s=0.3)
    assert time.monotonic() - started < 3
    assert info.value.timeout_s == 0.3
    time.sleep(0.2)
    assert not [p for p in _descendants_with(marker) if p.status() != psutil.STATUS_ZOMBIE]
    assert not [c for c in psutil.Process().children(recursive=True) if c.status() == psutil.STATUS_ZOMBIE]


def test_fifty_hangs_leave_no_process_behind(tmp_path: Path) -> None:
    marker = f"npuwatch-fifty-{os.getpid()}"
    tool = _script(tmp_path, "hang", f"sleep 300 # {marker}\n")
    for _ in range(50):
        with pytest.raises(ToolTimeout):
            run_tool([tool], timeout_s=0.02)
    time.sleep(0.2)
    assert _descendants_with(marker) == []
    assert psutil.Process().children(recursive=True) == []


def test_non_zero_exit_is_tool_failed_with_stderr_tail(tmp_path: Path) -> None:
    tool = _script(tmp_path, "crash", "echo 'driver not loaded' >&2\nexit 3\n")
    with pytest.raises(ToolFailed) as info:
        run_tool([tool], timeout_s=5)
    assert info.value.result.returncode == 3
    assert "driver not loaded" in str(info.value)
    assert run_tool([tool], timeout_s=5, check=False).returncode == 3


def test_output_is_bounded(tmp_path: Path) -> None:
    tool = _script(tmp_path, "flood", "head -c 5000000 /dev/zero\n")
    result = run_tool([tool], timeout_s=10, max_output_bytes=1000)
    assert len(result.stdout) == 1000
    assert result.truncated


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
