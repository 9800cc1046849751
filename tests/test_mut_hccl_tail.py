"""``collectors.hccl_tail``'s helpers, boundaries on both sides (bench/mutation.py)."""

from __future__ import annotations

import io
import json
import os
from pathlib import Path

import pytest

from collectors import hccl_tail
from collectors.hccl_tail import StateFile, iter_line_batches, split_complete_lines


def test_default_log_root_env_then_home(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("ASCEND_PROCESS_LOG_PATH", str(tmp_path))
    assert hccl_tail.default_log_root() == tmp_path
    monkeypatch.setenv("ASCEND_PROCESS_LOG_PATH", "")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert hccl_tail.default_log_root() == tmp_path / "home" / "ascend" / "log"


def test_split_complete_lines() -> None:
    assert split_complete_lines(b"no newline", 10) == ([], 0)
    assert split_complete_lines(b"a\nbc\npartial", 10) == (["a", "bc"], 5)
    assert split_complete_lines(b"\n", 10) == ([""], 1)
    assert split_complete_lines(b"abcd\nab\n", 3) == (["abc", "ab"], 8)
    assert split_complete_lines(b"abc\n", 3) == (["abc"], 4)
    assert split_complete_lines(b"abcdef\n", 0) == (["abcdef"], 7)  # 0: no limit
    assert split_complete_lines(b"\xff\n", 5) == (["\ufffd"], 2)


def batches(data: bytes, max_line: int, chunk: int) -> list[list[str]]:
    return list(iter_line_batches(io.BytesIO(data).read, max_line, chunk))


def test_iter_line_batches_carries_partial_lines_across_chunks() -> None:
    assert batches(b"ab\ncd\nef", 10, 4) == [["ab"], ["cd"], ["ef"]]
    assert batches(b"abc\n", 10, 2) == [["abc"]]
    assert batches(b"", 10, 4) == []


def test_iter_line_batches_cuts_an_endless_line_and_skips_its_rest() -> None:
    # A line of exactly max_line without its newline yet is cut at once; the rest is skipped.
    assert batches(b"abcdefgh\nxy\n", 4, 3) == [["abcd"], ["xy"]]
    assert batches(b"abc\nxy\n", 4, 3) == [["abc"], ["xy"]]
    assert batches(b"abcdefgh", 4, 100) == [["abcd"]]  # cut, and the skipped rest is not yielded at the end
    assert batches(b"abc", 4, 100) == [["abc"]]  # shorter than max_line: the last partial line is kept


def test_iter_line_batches_short_rest_is_kept_as_carry() -> None:
    assert batches(b"x\nabc", 4, 100) == [["x"], ["abc"]]
    assert batches(b"x\nabcd", 4, 100) == [["x"], ["abcd"]]


def test_state_file_without_a_path_does_nothing(tmp_path: Path) -> None:
    state = StateFile(None)
    assert state.path is None
    assert state.load() is None
    assert state.save({"version": 1}) is True
    assert state.error is None


def test_state_file_round_trip_and_errors(tmp_path: Path) -> None:
    state = StateFile(tmp_path / "sub" / "state.json")
    assert state.load() is None
    assert state.error is None
    assert state.save({"version": hccl_tail.STATE_VERSION, "files": {}}) is True
    assert json.loads((tmp_path / "sub" / "state.json").read_text()) == {"version": 1, "files": {}}
    assert state.load() == {"version": 1, "files": {}}
    assert [p.name for p in (tmp_path / "sub").iterdir()] == ["state.json"]
    (tmp_path / "sub" / "state.json").write_text("{broken")
    assert state.load() is None
    assert state.error is not None and state.error.startswith(
        f"state file {tmp_path / 'sub' / 'state.json'} unreadable, starting afresh: ")
    (tmp_path / "sub" / "state.json").write_text(json.dumps({"version": 99}))
    assert StateFile(tmp_path / "sub" / "state.json").load() is None
    other = StateFile(tmp_path / "sub" / "state.json")
    other.load()
    assert other.error == f"state file {tmp_path / 'sub' / 'state.json'} has an unknown layout, starting afresh"
    (tmp_path / "sub" / "state.json").write_text("[1]")
    listed = StateFile(tmp_path / "sub" / "state.json")
    assert listed.load() is None
    assert listed.error is not None


def test_state_file_save_failure_is_reported_and_cleared_by_a_success(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    state = StateFile(blocker / "state.json")  # its directory is a file
    assert state.save({"version": 1}) is False
    assert state.error is not None and state.error.startswith(f"cannot write state file {blocker / 'state.json'}: ")
    state.path = tmp_path / "ok.json"
    assert state.save({"version": 1}) is True
    assert state.error is None


def test_state_file_save_leaves_no_temporary_file_when_the_replace_fails(tmp_path: Path) -> None:
    target = tmp_path / "state.json"
    target.mkdir()  # os.replace of a file onto a directory fails
    state = StateFile(target)
    assert state.save({"version": 1}) is False
    assert sorted(p.name for p in tmp_path.iterdir()) == ["state.json"]


def test_under_and_static_prefix() -> None:
    assert hccl_tail._under("/a/b/c", "/a/b")
    assert hccl_tail._under("/a/b", "/a/b")
    assert not hccl_tail._under("/a/bc", "/a/b")
    assert not hccl_tail._under("relative", "/a")
    assert hccl_tail._static_prefix("/var/log/debug/plog/*.log") == "/var/log/debug/plog"
    assert hccl_tail._static_prefix("/var/log/debug/device-*/*.log") == "/var/log/debug"
    assert hccl_tail._static_prefix("*.log") == os.sep
    assert hccl_tail._static_prefix("logs/x.log") == "logs"


def test_tracked_from_json_defaults() -> None:
    tracked = hccl_tail._Tracked.from_json({"path": "/p", "offset": "7"})
    assert (tracked.path, tracked.offset, tracked.head, tracked.head_len, tracked.seen_at) == ("/p", 7, "", 0, 0.0)
    assert (tracked.skip_long, tracked.restarted, tracked.meta, tracked.missing) == (False, False, {}, False)
    full = hccl_tail._Tracked("/p", 3, "h", 1, 2.5, True, True, {"k": 1})
    assert full.to_json() == {"path": "/p", "offset": 3, "head": "h", "head_len": 1, "seen_at": 2.5,
                              "skip_long": True, "meta": {"k": 1}}
    assert hccl_tail._Tracked.from_json(full.to_json()) == hccl_tail._Tracked("/p", 3, "h", 1, 2.5, True, False,
                                                                               {"k": 1})
