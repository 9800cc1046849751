"""The incremental log tailer (offsets, rotation, truncation, restarts, budgets, safety) and the
HcclLogCollector built on it (counters, persistence, recent events and hints)."""

from __future__ import annotations

import io
import json
import os
from datetime import datetime
from pathlib import Path

import pytest

from collectors.base import NoData
from collectors.catalogue import CATALOGUE, HCCL_CATEGORIES
from collectors.hccl import tail as hccl_tail
from collectors.hccl.collector import PRIMARY_CODES, HcclLogCollector
from collectors.hccl.tail import (
    DEFAULT_GLOBS,
    LogTailer,
    StateFile,
    default_log_root,
    iter_line_batches,
    split_complete_lines,
)

NOW = 1_800_000_000.0


class Clock:
    def __init__(self, now: float = NOW) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def root(tmp_path: Path) -> Path:
    base = tmp_path / "ascend" / "log"
    (base / "debug" / "plog").mkdir(parents=True)
    return base


def plog(root: Path, name: str = "plog-1_1.log") -> Path:
    return root / "debug" / "plog" / name


def write(path: Path, text: str, mtime: float = NOW, mode: str = "a") -> None:
    with path.open(mode, encoding="utf-8") as handle:
        handle.write(text)
    os.utime(path, (mtime, mtime))


def tailer(root: Path, state: Path | None = None, **kwargs: object) -> LogTailer:
    kwargs.setdefault("clock", Clock())
    return LogTailer([root], None, None, state, **kwargs)  # type: ignore[arg-type]


def lines_of(t: LogTailer) -> list[str]:
    return [line for chunk in t.poll() for line in chunk.lines]


def test_defaults(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("ASCEND_PROCESS_LOG_PATH", str(tmp_path))
    assert default_log_root() == tmp_path
    monkeypatch.delenv("ASCEND_PROCESS_LOG_PATH")
    assert default_log_root() == Path.home() / "ascend" / "log"
    assert "debug/device-*/*.log" in DEFAULT_GLOBS


def test_reads_only_what_was_appended(root: Path) -> None:
    t = tailer(root)
    write(plog(root), "a\nb\n")
    assert lines_of(t) == ["a", "b"]
    assert lines_of(t) == []
    write(plog(root), "c\n")
    assert lines_of(t) == ["c"]
    assert t.bytes_read_total == 6


def test_default_globs_cover_run_and_device_logs(root: Path) -> None:
    (root / "run" / "plog").mkdir(parents=True)
    (root / "debug" / "device-3").mkdir(parents=True)
    write(root / "run" / "plog" / "plog-2_2.log", "run\n")
    write(root / "debug" / "device-3" / "device-9_1.log", "dev\n")
    write(root / "debug" / "plog" / "notes.txt", "ignored\n")
    assert sorted(lines_of(tailer(root))) == ["dev", "run"]


def test_partial_line_waits_for_its_newline(root: Path) -> None:
    t = tailer(root)
    write(plog(root), "whole\npart")
    assert lines_of(t) == ["whole"]
    write(plog(root), "ial\n")
    assert lines_of(t) == ["partial"]


def test_partial_line_of_an_idle_file_is_flushed(root: Path) -> None:
    clock = Clock()
    t = tailer(root, clock=clock, idle_flush_s=300)
    write(plog(root), "no newline at end", mtime=NOW - 10)
    assert lines_of(t) == []
    clock.now = NOW + 600
    assert lines_of(t) == ["no newline at end"]


def test_rotation_new_file_at_same_path_starts_at_zero(root: Path) -> None:
    t = tailer(root)
    path = plog(root)
    write(path, "old-1\nold-2\n")
    assert lines_of(t) == ["old-1", "old-2"]
    path.rename(path.with_name("plog-1_1.log.1"))  # out of the glob
    write(path, "new-1\n")
    chunks = list(t.poll())
    assert [line for c in chunks for line in c.lines] == ["new-1"]
    assert chunks[0].restarted is True


def test_renamed_file_keeps_its_offset(root: Path) -> None:
    t = tailer(root)
    path = plog(root)
    write(path, "one\n")
    assert lines_of(t) == ["one"]
    moved = path.with_name("plog-1_2.log")  # still matched by the glob
    path.rename(moved)
    write(moved, "two\n")
    assert lines_of(t) == ["two"]


def test_truncation_restarts_at_zero(root: Path) -> None:
    t = tailer(root)
    path = plog(root)
    write(path, "aaaaaaaaaa\nbbbbbbbbbb\n")
    assert len(lines_of(t)) == 2
    write(path, "c\n", mode="w")
    chunks = list(t.poll())
    assert [line for c in chunks for line in c.lines] == ["c"]
    assert chunks[0].restarted


def test_replaced_content_with_same_inode_is_detected(root: Path) -> None:
    t = tailer(root)
    path = plog(root)
    write(path, "x" * 300 + "\n")
    lines_of(t)
    # Same inode, rewritten and grown past the old offset: the head fingerprint differs.
    write(path, "y" * 300 + "\n" + "z\n", mode="w")
    assert lines_of(t) == ["y" * 300, "z"]


def test_restart_resumes_from_committed_offsets(root: Path, tmp_path: Path) -> None:
    state = tmp_path / "state" / "tail.json"
    write(plog(root), "1\n2\n")
    t = tailer(root, state)
    assert lines_of(t) == ["1", "2"]
    t.extra = {"counts": 2}
    assert t.commit()
    write(plog(root), "3\n")
    again = tailer(root, state)
    assert again.first_start is False
    assert again.extra == {"counts": 2}
    assert lines_of(again) == ["3"]
    assert again.bytes_read_total == 6


def test_uncommitted_reads_are_read_again_after_restart(root: Path, tmp_path: Path) -> None:
    state = tmp_path / "tail.json"
    write(plog(root), "1\n")
    first = tailer(root, state)
    first.commit()  # offsets at 0 before anything was read
    assert lines_of(first) == ["1"]  # read but never committed (crash)
    assert lines_of(tailer(root, state)) == ["1"]


def test_first_start_window(root: Path) -> None:
    write(plog(root, "recent.log"), "recent\n", mtime=NOW - 600)
    write(plog(root, "stale.log"), "stale\n", mtime=NOW - 7200)
    t = tailer(root, first_start_window_s=3600)
    assert lines_of(t) == ["recent"]
    write(plog(root, "stale.log"), "fresh\n")
    assert lines_of(t) == ["fresh"]


def test_byte_budget_spreads_a_big_file_over_cycles(root: Path) -> None:
    lines = [f"line-{i:05d}" for i in range(2000)]
    write(plog(root), "".join(line + "\n" for line in lines))
    t = tailer(root, byte_budget=4096, max_line_bytes=1024, chunk_bytes=1024)
    seen: list[str] = []
    cycles = 0
    while True:
        new = lines_of(t)
        if not new:
            break
        assert sum(len(x) + 1 for x in new) <= 4096
        seen.extend(new)
        cycles += 1
    assert seen == lines
    assert cycles >= 5
    assert t.budget_exhausted is False


def test_byte_budget_is_shared_between_files(root: Path) -> None:
    write(plog(root, "big.log"), "b" * 99 + "\n" + ("B" * 99 + "\n") * 200)
    write(plog(root, "small.log"), "s\n")
    t = tailer(root, byte_budget=1000, max_line_bytes=200, chunk_bytes=500)
    got = lines_of(t)
    assert "s" in got
    assert t.budget_exhausted is True


def test_long_lines_are_cut_and_memory_stays_bounded(root: Path) -> None:
    write(plog(root), "A" * 200_000 + "\nafter\n")
    t = tailer(root, max_line_bytes=1000, chunk_bytes=4096)
    got = lines_of(t)
    assert got[0] == "A" * 1000
    assert got[-1] == "after"
    assert all(len(line) <= 1000 for line in got)


def test_symlink_outside_the_root_is_not_followed(root: Path, tmp_path: Path) -> None:
    secret = tmp_path / "outside.log"
    write(secret, "secret\n")
    plog(root, "evil.log").symlink_to(secret)
    inside = plog(root, "real.log")
    write(inside, "inside\n")
    plog(root, "alias.log").symlink_to(inside)
    assert lines_of(tailer(root)) == ["inside"]


def test_fifo_is_not_opened(root: Path) -> None:
    os.mkfifo(plog(root, "pipe.log"))
    write(plog(root), "ok\n")
    assert lines_of(tailer(root)) == ["ok"]


def test_missing_directory_is_not_an_error(tmp_path: Path) -> None:
    t = tailer(tmp_path / "nowhere")
    assert lines_of(t) == []
    assert t.roots_exist() is False
    assert t.read_errors == []


def test_explicit_file_absolute_glob_and_kernel_log(tmp_path: Path) -> None:
    jobs = tmp_path / "jobs" / "j1"
    jobs.mkdir(parents=True)
    write(jobs / "stdout.log", "job\n")
    single = tmp_path / "single.txt"
    write(single, "single\n")
    kern = tmp_path / "kern.log"
    write(kern, "kernel\n")
    t = LogTailer([single], [str(tmp_path / "jobs" / "*" / "*.log")], kern, None, clock=Clock())
    assert sorted(lines_of(t)) == ["job", "kernel", "single"]


def test_unwritable_state_file_is_reported_not_raised(root: Path, tmp_path: Path) -> None:
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("x")
    t = tailer(root, blocker / "state.json")
    write(plog(root), "a\n")
    assert lines_of(t) == ["a"]
    assert t.commit() is False
    assert t.state_error is not None and "state.json" in t.state_error
    write(plog(root), "b\n")
    assert lines_of(t) == ["b"]  # in-memory offsets still work


def test_corrupt_state_file_starts_afresh(root: Path, tmp_path: Path) -> None:
    state = tmp_path / "state.json"
    state.write_text("{not json")
    t = tailer(root, state)
    assert t.first_start is True
    assert t.state_error is not None
    state.write_text(json.dumps({"version": 1, "files": {"1:2": {"path": 3}}}))
    t = tailer(root, state)
    assert t.state_error is not None and "damaged" in t.state_error


def test_state_is_written_atomically(root: Path, tmp_path: Path) -> None:
    state = tmp_path / "state.json"
    write(plog(root), "a\n")
    t = tailer(root, state)
    lines_of(t)
    assert t.commit()
    data = json.loads(state.read_text())
    assert data["version"] == 1
    assert [f["offset"] for f in data["files"].values()] == [2]
    assert [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")] == []


def test_forgotten_files_are_pruned(root: Path) -> None:
    clock = Clock()
    t = tailer(root, clock=clock, forget_after_s=100)
    write(plog(root), "a\n")
    lines_of(t)
    plog(root).unlink()
    clock.now += 50
    lines_of(t)
    assert len(t.tracked_keys()) == 1
    clock.now += 100
    lines_of(t)
    assert t.tracked_keys() == set()


def test_split_and_iterate_helpers() -> None:
    assert split_complete_lines(b"a\nb\nc", 10) == (["a", "b"], 4)
    assert split_complete_lines(b"abc", 10) == ([], 0)
    assert split_complete_lines(b"\xff\n", 10) == (["\ufffd"], 2)
    stream = io.BytesIO(b"one\n" + b"L" * 50 + b"\nlast")
    batches = list(iter_line_batches(stream.read, max_line=10, chunk_bytes=8))
    assert [line for batch in batches for line in batch] == ["one", "L" * 10, "last"]


# ------------------------------------------------------------------ the collector on top



EI0002 = "EI0002: [PID: 1] {ts} The wait execution of the Notify register times out. remote rank [3].\n"
CQE = "[ERROR] HCCL(1,p):{ts} [heartbeat.cc:1] [2][ROCE CQE ERROR]cqe error status[12]\n"


def collector(root: Path, state: Path | None, clock: Clock | None = None) -> HcclLogCollector:
    return HcclLogCollector([root], None, None, state, clock=clock or Clock())


def values(samples: list, metric: str) -> dict:  # type: ignore[type-arg]
    return {s.labels: s.value for s in samples if s.metric == metric}


def test_collector_samples_follow_the_catalogue(root: Path, tmp_path: Path) -> None:
    write(plog(root), EI0002.format(ts="2026-01-01-00:00:00.000.000") + CQE.format(ts="2026-01-01-00:00:05"
                                                                                   ".000.000"))
    samples = collector(root, tmp_path / "s.json").collect()
    for sample in samples:
        spec = CATALOGUE[sample.metric]
        assert tuple(k for k, _ in sample.labels) == spec.labels
        if sample.metric == "npu_hccl_errors_total":
            assert dict(sample.labels)["category"] in HCCL_CATEGORIES
    errors = values(samples, "npu_hccl_errors_total")
    assert errors[(("code", "EI0002"), ("category", "exec_timeout"))] == 1
    assert errors[(("code", "cqe_error"), ("category", "roce_cqe"))] == 1
    assert errors[(("code", "EI0006"), ("category", "connect_timeout"))] == 0  # pre-created
    assert len([k for k, v in errors.items() if v == 0]) == len(PRIMARY_CODES) - 1
    last = values(samples, "npu_hccl_last_error_timestamp_seconds")
    assert set(last) == {(("category", "exec_timeout"),), (("category", "roce_cqe"),)}
    assert values(samples, "npuwatch_log_bytes_read_total")[()] == plog(root).stat().st_size


def test_collector_counts_survive_restart_without_double_counting(root: Path, tmp_path: Path) -> None:
    state = tmp_path / "s.json"
    key = (("code", "EI0002"), ("category", "exec_timeout"))
    write(plog(root), EI0002.format(ts="2026-01-01-00:00:00.000.000"))
    assert values(collector(root, state).collect(), "npu_hccl_errors_total")[key] == 1
    # Restart: nothing new, the count stays 1.
    assert values(collector(root, state).collect(), "npu_hccl_errors_total")[key] == 1
    # Restart, the same incident printed again 10 s later (dedup memory persisted) and a new one.
    write(plog(root), EI0002.format(ts="2026-01-01-00:00:10.000.000"))
    c = collector(root, state)
    assert values(c.collect(), "npu_hccl_errors_total")[key] == 1
    write(plog(root), EI0002.format(ts="2026-01-01-02:00:00.000.000"))
    assert values(c.collect(), "npu_hccl_errors_total")[key] == 2


def test_collector_rotation_counts_the_new_file(root: Path) -> None:
    c = collector(root, None)
    key = (("code", "EI0002"), ("category", "exec_timeout"))
    path = plog(root)
    write(path, EI0002.format(ts="2026-01-01-00:00:00.000.000"))
    c.collect()
    path.rename(path.with_name("old.1"))
    write(path, EI0002.format(ts="2026-01-01-00:00:00.000.000"))  # same text, a new file: a new stream
    assert values(c.collect(), "npu_hccl_errors_total")[key] == 2


def test_collector_recent_events_and_hints(root: Path) -> None:
    incident = datetime(2026, 1, 1, 0, 0, 0).timestamp()  # local time, as plogs print it
    clock = Clock(incident + 100)
    write(plog(root), EI0002.format(ts="2026-01-01-00:00:00.000.000"), mtime=incident)
    c = collector(root, None, clock)
    c.collect()
    assert [e.code for e in c.recent_events(window_s=200)] == ["EI0002"]
    assert c.recent_events(window_s=50) == []
    hints = c.hints()
    summary = [(h.kind, h.value, h.count, h.last_timestamp) for h in hints]
    assert summary == [("remote_rank", "3", 1, incident)]
    assert c.hints(window_s=50) == []


def test_collector_keeps_going_when_state_is_unwritable(root: Path, tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    c = collector(root, blocker / "state.json")
    write(plog(root), EI0002.format(ts="2026-01-01-00:00:00.000.000"))
    samples = c.collect()
    assert values(samples, "npu_hccl_errors_total")[(("code", "EI0002"), ("category", "exec_timeout"))] == 1
    assert c.state_error is not None
    assert c.errors and "state.json" in c.errors[0]


def test_collector_without_log_directories_has_no_data(tmp_path: Path) -> None:
    with pytest.raises(NoData):
        collector(tmp_path / "nowhere", None).collect()


def test_collector_with_empty_log_directory_exports_zeros(root: Path) -> None:
    samples = collector(root, None).collect()
    assert all(s.value == 0 for s in samples)
    assert len(values(samples, "npu_hccl_errors_total")) == len(HCCL_CATEGORIES)


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
    assert (tmp_path / "sub" / "state.json").read_text() == '{"version":1,"files":{}}'
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
    assert (tracked.tail, tracked.tail_len, tracked.size) == ("", 0, 0)
    full = hccl_tail._Tracked("/p", 3, "h", 1, 2.5, True, True, {"k": 1}, False, "t", 2, 9)
    assert full.to_json() == {"path": "/p", "offset": 3, "head": "h", "head_len": 1, "seen_at": 2.5,
                              "skip_long": True, "meta": {"k": 1}, "tail": "t", "tail_len": 2, "size": 9}
    assert hccl_tail._Tracked.from_json(full.to_json()) == hccl_tail._Tracked("/p", 3, "h", 1, 2.5, True, False,
                                                                               {"k": 1}, False, "t", 2, 9)


# --------------------------------------------------------------------------- LogTailer edges


def plog_dir(tmp_path: Path) -> Path:
    base = tmp_path / "log"
    (base / "debug" / "plog").mkdir(parents=True)
    return base


def chunks_of(tailer: hccl_tail.LogTailer) -> list[hccl_tail.Chunk]:
    return list(tailer.poll())


def test_first_start_window_is_inclusive(tmp_path: Path) -> None:
    root = plog_dir(tmp_path)
    write(root / "debug/plog/edge.log", "edge\n", mtime=NOW - 3600)
    write(root / "debug/plog/old.log", "old\n", mtime=NOW - 3601)
    tailer = hccl_tail.LogTailer([root], clock=Clock())
    assert [line for chunk in chunks_of(tailer) for line in chunk.lines] == ["edge"]


def test_idle_flush_of_a_partial_line_is_inclusive(tmp_path: Path) -> None:
    root = plog_dir(tmp_path)
    clock = Clock()
    write(root / "debug/plog/p.log", "partial", mtime=NOW - 299)
    tailer = hccl_tail.LogTailer([root], clock=clock)
    assert chunks_of(tailer) == []
    clock.now = NOW + 1  # the file is now exactly 300 s idle
    (chunk,) = chunks_of(tailer)
    assert chunk.lines == ["partial"]
    assert chunk.ref_time == NOW - 299
    assert chunk.path == str(root / "debug/plog/p.log")
    assert chunk.restarted is False


def test_a_line_of_exactly_max_line_bytes_is_whole_and_the_next_one_too(tmp_path: Path) -> None:
    root = plog_dir(tmp_path)
    write(root / "debug/plog/p.log", "abcd\nefgh\n")
    tailer = hccl_tail.LogTailer([root], clock=Clock(), max_line_bytes=4, chunk_bytes=5)
    assert [line for chunk in chunks_of(tailer) for line in chunk.lines] == ["abcd", "efgh"]


def test_a_long_line_cut_across_reads_skips_exactly_to_its_newline(tmp_path: Path) -> None:
    root = plog_dir(tmp_path)
    write(root / "debug/plog/p.log", "abcdefghij\nk\nlm\n")
    tailer = hccl_tail.LogTailer([root], clock=Clock(), max_line_bytes=4, chunk_bytes=4)
    assert [line for chunk in chunks_of(tailer) for line in chunk.lines] == ["abcd", "k", "lm"]
    write(root / "debug/plog/p.log", "\nnext\n")
    assert [line for chunk in chunks_of(tailer) for line in chunk.lines] == ["", "next"]


def test_budget_exhausted_only_when_data_is_left(tmp_path: Path) -> None:
    root = plog_dir(tmp_path)
    write(root / "debug/plog/p.log", "12345\n")  # 6 bytes
    exact = hccl_tail.LogTailer([root], clock=Clock(), byte_budget=6)
    assert [c.lines for c in chunks_of(exact)] == [["12345"]]
    assert exact.budget_exhausted is False
    assert exact.bytes_read_total == 6
    short = hccl_tail.LogTailer([root], clock=Clock(), byte_budget=5)
    assert chunks_of(short) == []
    assert short.budget_exhausted is True


def test_two_files_share_the_budget_then_the_leftover(tmp_path: Path) -> None:
    root = plog_dir(tmp_path)
    write(root / "debug/plog/a.log", "aaaa\naaaa\n")  # 10 bytes
    write(root / "debug/plog/b.log", "b\n")  # 2 bytes
    tailer = hccl_tail.LogTailer([root], clock=Clock(), byte_budget=12, chunk_bytes=5)
    got = sorted(line for chunk in chunks_of(tailer) for line in chunk.lines)
    assert got == ["aaaa", "aaaa", "b"]
    assert tailer.budget_exhausted is False


def test_poll_resets_its_per_poll_reports(tmp_path: Path) -> None:
    root = plog_dir(tmp_path)
    write(root / "debug/plog/p.log", "x\n")
    tailer = hccl_tail.LogTailer([root], clock=Clock(), byte_budget=1)
    chunks_of(tailer)
    assert tailer.budget_exhausted is True
    tailer.byte_budget = 100
    chunks_of(tailer)
    assert (tailer.budget_exhausted, tailer.discovery_capped, tailer.read_errors, tailer.files_seen) == (
        False, None, [], 1)


def test_a_vanished_file_is_forgotten_only_after_forget_after_s(tmp_path: Path) -> None:
    root = plog_dir(tmp_path)
    path = root / "debug/plog/p.log"
    write(path, "x\n")
    clock = Clock()
    tailer = hccl_tail.LogTailer([root], clock=clock, forget_after_s=100)
    chunks_of(tailer)
    (key,) = tailer.tracked_keys()
    moved = tmp_path / "elsewhere.log"
    path.rename(moved)
    clock.now = NOW + 100
    chunks_of(tailer)
    assert tailer.tracked_keys() == {key}
    assert tailer._tracked[key].missing is True
    clock.now = NOW + 100.5
    chunks_of(tailer)
    assert tailer.tracked_keys() == set()


def test_a_returning_file_is_fingerprinted_and_kept_when_unchanged(tmp_path: Path) -> None:
    root = plog_dir(tmp_path)
    path = root / "debug/plog/p.log"
    write(path, "one\n")
    tailer = hccl_tail.LogTailer([root], clock=Clock())
    assert [c.lines for c in chunks_of(tailer)] == [["one"]]
    moved = tmp_path / "away.log"
    path.rename(moved)
    chunks_of(tailer)
    moved.rename(path)
    assert chunks_of(tailer) == []  # same inode, same head, no growth: nothing new, no restart
    (key,) = tailer.tracked_keys()
    assert tailer._tracked[key].missing is False
    assert tailer._tracked[key].offset == 4


def test_file_meta_of_an_unknown_key_is_a_fresh_dict(tmp_path: Path) -> None:
    tailer = hccl_tail.LogTailer([tmp_path], clock=Clock())
    assert tailer.file_meta("0:0") == {}


def test_a_damaged_state_starts_afresh_with_the_reason(tmp_path: Path) -> None:
    state = tmp_path / "state.json"
    state.write_text(json.dumps({"version": hccl_tail.STATE_VERSION, "files": {"1:2": {"offset": 3}}}))
    tailer = hccl_tail.LogTailer([tmp_path], state_file=state, clock=Clock())
    assert tailer.first_start is True
    assert tailer.tracked_keys() == set()
    assert tailer.state_error is not None and tailer.state_error.startswith(
        f"state file {state} is damaged, starting afresh: ")
    good = tmp_path / "good.json"
    good.write_text(json.dumps({"version": hccl_tail.STATE_VERSION}))
    restored = hccl_tail.LogTailer([tmp_path], state_file=good, clock=Clock())
    assert (restored.first_start, restored.bytes_read_total, restored.extra) == (False, 0, {})


def test_commit_writes_offsets_total_and_extra(tmp_path: Path) -> None:
    root = plog_dir(tmp_path)
    write(root / "debug/plog/p.log", "abc\n")
    state = tmp_path / "state.json"
    tailer = hccl_tail.LogTailer([root], state_file=state, clock=Clock())
    chunks_of(tailer)
    tailer.extra["k"] = 1
    assert tailer.commit() is True
    saved = json.loads(state.read_text())
    assert saved["version"] == hccl_tail.STATE_VERSION
    assert saved["bytes_read_total"] == 4
    assert saved["extra"] == {"k": 1}
    (entry,) = saved["files"].values()
    assert (entry["path"], entry["offset"], entry["head_len"]) == (str(root / "debug/plog/p.log"), 4, 4)
    assert tailer.state_path == state
    again = hccl_tail.LogTailer([root], state_file=state, clock=Clock())
    assert again.bytes_read_total == 4
    assert again.extra == {"k": 1}


def test_roots_exist_counts_paths_absolute_glob_roots_and_the_kernel_log(tmp_path: Path) -> None:
    missing = tmp_path / "missing"
    assert hccl_tail.LogTailer([missing], globs=[], clock=Clock()).roots_exist() is False
    (tmp_path / "abs").mkdir()
    glob_root = hccl_tail.LogTailer([missing], globs=[str(tmp_path / "abs" / "*.log")], clock=Clock())
    assert glob_root.roots_exist() is True
    kernel = tmp_path / "kern.log"
    kernel.write_text("")
    assert hccl_tail.LogTailer([missing], globs=[], kernel_log=kernel, clock=Clock()).roots_exist() is True
    assert hccl_tail.LogTailer([missing], globs=["rel/*.log"], clock=Clock()).roots_exist() is False


def test_discover_dedupes_and_reports_an_unreadable_root(tmp_path: Path) -> None:
    root = plog_dir(tmp_path)
    write(root / "debug/plog/a.log", "a\n")
    write(root / "debug/plog/b.log", "b\n")
    (root / "debug/plog/0dir.log").mkdir()  # matches the glob, is no regular file
    tailer = hccl_tail.LogTailer([root / "debug/plog/a.log", root], clock=Clock())
    found = tailer.discover()
    assert sorted(os.path.basename(real) for _path, real in found) == ["a.log", "b.log"]
    dangling = tmp_path / "dangling"
    dangling.symlink_to(tmp_path / "nowhere")  # exists as a name, cannot be read: as an unreadable root
    probe = hccl_tail.LogTailer([dangling, root], clock=Clock())
    assert len(probe.discover()) == 2
    assert probe.read_errors == [f"{dangling}: permission denied"]
    assert hccl_tail.LogTailer([tmp_path / "absent"], clock=Clock()).discover() == []


def test_a_new_file_at_a_followed_path_is_a_restart(tmp_path: Path) -> None:
    root = plog_dir(tmp_path)
    path = root / "debug/plog/p.log"
    write(path, "old\n")
    tailer = hccl_tail.LogTailer([root], clock=Clock())
    assert [(c.lines, c.restarted) for c in chunks_of(tailer)] == [(["old"], False)]
    path.rename(tmp_path / "rotated.log")
    write(path, "new\n")
    assert [(c.lines, c.restarted) for c in chunks_of(tailer)] == [(["new"], True)]
    write(path, "more\n")
    assert [(c.lines, c.restarted) for c in chunks_of(tailer)] == [(["more"], False)]


def test_state_file_save_makes_parents_and_renames_a_sibling_temporary(tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    replaced: list[tuple[str, str]] = []
    real_replace = os.replace

    def spy(src: str, dst: object) -> None:
        replaced.append((src, str(dst)))
        real_replace(src, dst)  # type: ignore[arg-type]

    monkeypatch.setattr(hccl_tail.os, "replace", spy)
    target = tmp_path / "a" / "b" / "state.json"
    assert StateFile(target).save({"version": 1}) is True
    ((src, dst),) = replaced
    assert dst == str(target)
    assert os.path.dirname(src) == str(target.parent)
    assert os.path.basename(src).startswith("state.json.") and src.endswith(".tmp")


def test_tailer_limits_are_at_least_one_and_start_clean(tmp_path: Path) -> None:
    tailer = hccl_tail.LogTailer([tmp_path], byte_budget=0, max_line_bytes=0, chunk_bytes=-5, clock=Clock())
    assert (tailer.byte_budget, tailer.max_line_bytes, tailer.chunk_bytes) == (1, 1, 1)
    assert (tailer.read_errors, tailer.discovery_capped, tailer.files_seen, tailer.budget_exhausted) == (
        [], None, 0, False)
    assert tailer.extra == {}
    assert tailer.paths == [tmp_path]


def test_invalid_utf8_is_replaced_everywhere_a_line_is_made(tmp_path: Path) -> None:
    assert batches(b"\xffbcdefg\n", 4, 3) == [["\ufffdbcd"]]        # cut while the line goes on
    assert batches(b"x\n\xff", 4, 100) == [["x"], ["\ufffd"]]       # the last partial line
    root = plog_dir(tmp_path)
    path = root / "debug/plog/p.log"
    path.write_bytes(b"\xffbcdefgh\n\xfez")
    os.utime(path, (NOW - 400, NOW - 400))
    tailer = hccl_tail.LogTailer([root], clock=Clock(), max_line_bytes=4, chunk_bytes=4)
    assert [line for chunk in chunks_of(tailer) for line in chunk.lines] == ["\ufffdbcd", "\ufffdz"]


def test_skipping_a_long_line_stops_at_its_first_newline(tmp_path: Path) -> None:
    assert batches(b"abcdefgh\nx\ny\n", 4, 8) == [["abcd"], ["x", "y"]]
    assert batches(b"abcdefghijklmnop\nz\n", 4, 3) == [["abcd"], ["z"]]
    assert batches(b"abcdefg\n", 4, 100) == [["abcd"]]
    root = plog_dir(tmp_path)
    write(root / "debug/plog/p.log", "abcdefgh\nk\n")
    tailer = hccl_tail.LogTailer([root], clock=Clock(), max_line_bytes=4, chunk_bytes=4)
    assert [line for chunk in chunks_of(tailer) for line in chunk.lines] == ["abcd", "k"]
    write(root / "debug/plog/q.log", "abcdefgh\n")
    one_read = hccl_tail.LogTailer([root / "debug/plog/q.log"], clock=Clock(), max_line_bytes=4, chunk_bytes=100)
    assert [line for chunk in chunks_of(one_read) for line in chunk.lines] == ["abcd"]


def test_a_partial_line_of_exactly_max_line_bytes_is_cut_at_once(tmp_path: Path) -> None:
    root = plog_dir(tmp_path)
    path = root / "debug/plog/p.log"
    write(path, "abcd")
    tailer = hccl_tail.LogTailer([root], clock=Clock(), max_line_bytes=4)
    assert [line for chunk in chunks_of(tailer) for line in chunk.lines] == ["abcd"]
    write(path, "ef\ng\n")
    assert [line for chunk in chunks_of(tailer) for line in chunk.lines] == ["g"]


def test_an_idle_partial_line_after_a_skipped_rest(tmp_path: Path) -> None:
    root = plog_dir(tmp_path)
    path = root / "debug/plog/p.log"
    write(path, "abcdefghij\nxy", mtime=NOW - 400)
    tailer = hccl_tail.LogTailer([root], clock=Clock(), max_line_bytes=8, chunk_bytes=8)
    assert [line for chunk in chunks_of(tailer) for line in chunk.lines] == ["abcdefgh", "xy"]
    assert chunks_of(tailer) == []


def test_the_last_byte_of_the_budget_is_read(tmp_path: Path) -> None:
    root = plog_dir(tmp_path)
    write(root / "debug/plog/p.log", "ab\n\n")
    tailer = hccl_tail.LogTailer([root], clock=Clock(), byte_budget=4, chunk_bytes=3)
    assert [line for chunk in chunks_of(tailer) for line in chunk.lines] == ["ab", ""]
    assert tailer.budget_exhausted is False
    single = plog_dir(tmp_path / "s")
    write(single / "debug/plog/p.log", "\n")
    one = hccl_tail.LogTailer([single], clock=Clock(), byte_budget=1)
    assert [line for chunk in chunks_of(one) for line in chunk.lines] == [""]


def test_budget_spent_in_the_first_pass_is_reported(tmp_path: Path) -> None:
    root = plog_dir(tmp_path)
    write(root / "debug/plog/p.log", "1\n\n")
    tailer = hccl_tail.LogTailer([root], clock=Clock(), byte_budget=2)
    assert [line for chunk in chunks_of(tailer) for line in chunk.lines] == ["1"]
    assert tailer.budget_exhausted is True


def test_an_unread_file_does_not_use_budget(tmp_path: Path) -> None:
    root = plog_dir(tmp_path)
    write(root / "debug/plog/a.log", "ab\n")
    write(root / "debug/plog/b.log", "c\n")
    tailer = hccl_tail.LogTailer([root], clock=Clock(), byte_budget=5)
    assert sorted(line for chunk in chunks_of(tailer) for line in chunk.lines) == ["ab", "c"]
    assert tailer.budget_exhausted is False


def test_a_present_file_is_never_forgotten(tmp_path: Path) -> None:
    root = plog_dir(tmp_path)
    write(root / "debug/plog/p.log", "x\n")
    clock = Clock()
    tailer = hccl_tail.LogTailer([root], clock=clock, forget_after_s=10)
    assert [c.lines for c in chunks_of(tailer)] == [["x"]]
    keys = tailer.tracked_keys()
    clock.now = NOW + 11
    assert chunks_of(tailer) == []
    assert tailer.tracked_keys() == keys
    assert all(not t.missing for t in tailer._tracked.values())


def test_the_oldest_tracked_files_go_beyond_the_cap(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(hccl_tail, "MAX_TRACKED_FILES", 2)
    root = plog_dir(tmp_path)
    clock = Clock()
    tailer = hccl_tail.LogTailer([root], clock=clock)
    seen: dict[str, str] = {}
    for n, name in enumerate(("a.log", "b.log", "c.log")):
        write(root / f"debug/plog/{name}", "x\n")
        clock.now = NOW + n
        chunks_of(tailer)
        new = tailer.tracked_keys() - set(seen)
        seen.update(dict.fromkeys(new, name))
    assert sorted(seen[key] for key in tailer.tracked_keys()) == ["b.log", "c.log"]


def test_head_fingerprint_covers_at_most_head_bytes_and_is_refreshed_when_the_file_grows(tmp_path: Path) -> None:
    root = plog_dir(tmp_path)
    path = root / "debug/plog/p.log"
    write(path, "x" * 9 + "\n")
    tailer = hccl_tail.LogTailer([root], clock=Clock())
    chunks_of(tailer)
    (key,) = tailer.tracked_keys()
    assert tailer._tracked[key].head_len == 10
    write(path, "y" * 245 + "\n")  # 256 bytes now: exactly HEAD_BYTES
    chunks_of(tailer)
    assert tailer._tracked[key].head_len == hccl_tail.HEAD_BYTES
    write(path, "z" * 99 + "\n")
    chunks_of(tailer)
    assert tailer._tracked[key].head_len == hccl_tail.HEAD_BYTES


def test_a_file_first_seen_empty_is_no_restart_when_it_grows(tmp_path: Path) -> None:
    root = plog_dir(tmp_path)
    path = root / "debug/plog/p.log"
    write(path, "")
    tailer = hccl_tail.LogTailer([root], clock=Clock())
    assert chunks_of(tailer) == []
    write(path, "x\n")
    assert [(c.lines, c.restarted) for c in chunks_of(tailer)] == [(["x"], False)]


def test_a_truncated_file_restarts_with_fresh_meta(tmp_path: Path) -> None:
    root = plog_dir(tmp_path)
    path = root / "debug/plog/p.log"
    write(path, "one\ntwo\n")
    tailer = hccl_tail.LogTailer([root], clock=Clock())
    chunks_of(tailer)
    (key,) = tailer.tracked_keys()
    tailer.file_meta(key)["seen"] = 2
    write(path, "3\n", mode="w")
    assert [(c.lines, c.restarted) for c in chunks_of(tailer)] == [(["3"], True)]
    assert tailer.file_meta(key) == {}


def test_default_paths_and_a_capped_absolute_glob_walk(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ASCEND_PROCESS_LOG_PATH", str(tmp_path / "cann"))
    assert hccl_tail.LogTailer(clock=Clock()).paths == [tmp_path / "cann"]
    logs = tmp_path / "abs"
    logs.mkdir()
    for name in ("a.log", "b.log", "c.log"):
        (logs / name).write_text("x\n")
    capped = hccl_tail.LogTailer([], globs=[str(logs / "*.log")], max_walk_entries=1, clock=Clock())
    assert len(capped.discover()) < 3
    assert capped.discovery_capped is not None


def test_forget_drops_the_least_recently_seen_beyond_the_cap(monkeypatch: pytest.MonkeyPatch,
                                                             tmp_path: Path) -> None:
    monkeypatch.setattr(hccl_tail, "MAX_TRACKED_FILES", 2)
    tailer = hccl_tail.LogTailer([tmp_path], clock=Clock())
    for key, seen_at in (("1:1", 3.0), ("1:2", 2.0), ("1:3", 1.0)):
        tailer._tracked[key] = hccl_tail._Tracked(f"/p{key}", 0, "", 0, seen_at)
    tailer._forget({"1:1", "1:2", "1:3"}, 10.0)
    assert tailer.tracked_keys() == {"1:1", "1:2"}


def test_a_new_big_file_fingerprints_only_its_head(tmp_path: Path) -> None:
    root = plog_dir(tmp_path)
    write(root / "debug/plog/p.log", "x" * 299 + "\n")
    tailer = hccl_tail.LogTailer([root], clock=Clock())
    chunks_of(tailer)
    (tracked,) = tailer._tracked.values()
    assert tracked.head_len == hccl_tail.HEAD_BYTES


def test_a_fifo_matching_the_glob_does_not_hide_the_files_after_it(tmp_path: Path) -> None:
    root = plog_dir(tmp_path)
    os.mkfifo(root / "debug/plog/0fifo.log")
    write(root / "debug/plog/a.log", "a\n")
    tailer = hccl_tail.LogTailer([root], clock=Clock())
    assert [os.path.basename(real) for _path, real in tailer.discover()] == ["a.log"]


def test_budget_exhausted_is_reset_when_a_poll_starts(tmp_path: Path) -> None:
    root = plog_dir(tmp_path)
    write(root / "debug/plog/a.log", "1\n2\n")
    tailer = hccl_tail.LogTailer([root], clock=Clock(), byte_budget=2)
    chunks_of(tailer)
    assert tailer.budget_exhausted is True
    polling = tailer.poll()
    next(polling)
    assert tailer.budget_exhausted is False
    polling.close()
