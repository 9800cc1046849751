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
from collectors.hccl.collector import PRIMARY_CODES, HcclLogCollector
from collectors.hccl.tail import (
    DEFAULT_GLOBS,
    LogTailer,
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
