"""``agent.core.tool_runner`` without running a tool: exact messages, boundaries, tool resolution, environment.

Real subprocesses (timeouts kill the whole group, no zombies remain; bench/mutation.py runs those
in a PID namespace): tests/integration/test_tool_runner.py.
"""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from agent.core import tool_runner
from agent.core.tool_runner import (
    RUN_ID_ENV,
    RunResult,
    ToolFailed,
    ToolMissing,
    ToolTimeout,
    resolve_tool,
    run_tool,
)
from tests.support.scripts import shell_script as _script


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


def _tool_script(tmp_path: Path, name: str, body: str, *, executable: bool = True) -> str:
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
    plain = _tool_script(tmp_path, "npu-smi", "", executable=False)
    with pytest.raises(ToolMissing) as info:
        resolve_tool("npu-smi", plain, [], str(tmp_path / "nowhere"))
    assert info.value.searched == (plain,)
    assert str(info.value) == f"{plain}: exists but cannot be executed (not executable: chmod +x it, or set the " \
                              "path of the real tool)"
    with pytest.raises(ToolMissing, match="it is a directory"):
        resolve_tool("npu-smi", str(tmp_path), [], str(tmp_path))  # a directory is no tool
    with pytest.raises(ToolMissing, match="not found"):
        resolve_tool("npu-smi", str(tmp_path / "absent"), [], str(tmp_path))


@pytest.mark.parametrize(("head", "why"), [
    (b"#!/nonexistent/python3 -IS\nprint(1)\n", "its interpreter /nonexistent/python3 is missing"),
    (b"#!\n", "its #! line names no interpreter"),
    (b"\x7fELF\x02\x01\x01", "its ELF program loader is missing"),
    (b"MZ\x90\x00", "not a program this machine can run"),
])
def test_why_an_existing_tool_cannot_run(tmp_path: Path, head: bytes, why: str) -> None:
    path = tmp_path / "npu-smi"
    path.write_bytes(head)
    path.chmod(0o755)
    assert (tool_runner.why_cannot_run(str(path)) or "").startswith(why)
    assert tool_runner.why_cannot_run(str(tmp_path / "absent")) is None


def test_resolve_skips_standard_dirs_without_an_executable_tool(tmp_path: Path) -> None:
    empty, plain, good = tmp_path / "empty", tmp_path / "plain", tmp_path / "good"
    for directory in (empty, plain, good):
        directory.mkdir()
    _tool_script(plain, "npu-smi", "", executable=False)
    (good / "npu-smi").mkdir()  # a directory named like the tool is skipped too
    best = tmp_path / "best"
    best.mkdir()
    tool = _tool_script(best, "npu-smi", "")
    dirs = [str(empty), str(plain), str(good), str(best)]
    assert resolve_tool("npu-smi", None, dirs, str(tmp_path / "nowhere")) == tool
    with pytest.raises(ToolMissing) as info:
        resolve_tool("npu-smi", None, dirs[:3], str(tmp_path / "nowhere"))
    assert info.value.searched == ("PATH", *dirs[:3])


def test_resolve_uses_the_process_path_by_default(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    tool = _tool_script(tmp_path, "npu-smi", "")
    monkeypatch.setenv("PATH", str(tmp_path))
    assert resolve_tool("npu-smi", None, []) == tool
    assert resolve_tool("npu-smi", "", []) == tool  # an empty configured path means "not configured"


def test_tool_env_sets_c_locale_lets_extra_win_but_not_over_the_run_id(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LANG", "de_DE.UTF-8")
    monkeypatch.setenv("NPUWATCH_MUT_MARK", "kept")
    env = tool_runner._tool_env({"LC_ALL": "POSIX", RUN_ID_ENV: "forged", "EXTRA": "1"}, "run-1")
    assert env[b"LANG"] == b"C"
    assert env[b"LC_ALL"] == b"POSIX"
    assert env[b"EXTRA"] == b"1"
    assert env[b"NPUWATCH_MUT_MARK"] == b"kept"
    assert env[RUN_ID_ENV.encode()] == b"run-1"
    assert tool_runner._tool_env(None, "run-2")[b"LC_ALL"] == b"C"


def test_tool_env_follows_every_change_of_the_agents_environment_and_of_extra(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The encoded environment is reused between runs: a change to os.environ or to ``extra`` is still seen."""
    monkeypatch.setenv("NPUWATCH_ENV_PROBE", "one")
    extra = {"EXTRA": "a"}
    first = tool_runner._tool_env(extra, "run-1")
    assert first[b"NPUWATCH_ENV_PROBE"] == b"one" and first[b"EXTRA"] == b"a"
    first[b"EXTRA"] = b"mutated by a caller"  # a copy per run: the next run does not see it
    second = tool_runner._tool_env(extra, "run-2")
    assert second[b"EXTRA"] == b"a" and second[RUN_ID_ENV.encode()] == b"run-2"
    monkeypatch.setenv("NPUWATCH_ENV_PROBE", "two")
    assert tool_runner._tool_env(extra, "run-3")[b"NPUWATCH_ENV_PROBE"] == b"two"
    monkeypatch.delenv("NPUWATCH_ENV_PROBE")
    assert b"NPUWATCH_ENV_PROBE" not in tool_runner._tool_env(extra, "run-4")
    extra["EXTRA"] = "b"
    assert tool_runner._tool_env(extra, "run-5")[b"EXTRA"] == b"b"
    assert tool_runner._tool_env(None, "run-6").get(b"EXTRA") is None


def test_empty_argv_is_refused() -> None:
    with pytest.raises(ValueError, match=r"^empty argv$"):
        run_tool([], timeout_s=1)
