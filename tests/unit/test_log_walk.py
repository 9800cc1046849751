"""The bounded log walk: symlink loops, entry budget, unreadable directories, glob semantics."""

from __future__ import annotations

import os
import time
from pathlib import Path

from collectors.hccl.collector import HcclLogCollector
from collectors.hccl.tail import LogTailer
from collectors.log_walk import walk_matches

EI0002 = ("[ERROR] HCCL(2111665,all_reduce_test):2025-10-24-11:18:29.499.235 [task_exception_handler.cc:908] "
          "[2111665][TaskExecStage][Timeout][Host]Task run failed, base information is streamID:[2], taskID[21]\n")


def tree(root: Path, files: list[str]) -> None:
    for name in files:
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("x\n")


def rel(root: Path, paths: list[str]) -> list[str]:
    return sorted(os.path.relpath(p, root) for p in paths)


def test_segment_matching_reads_only_the_pattern_levels(tmp_path: Path) -> None:
    tree(tmp_path, ["debug/plog/a.log", "debug/plog/b.txt", "debug/plog/deep/c.log", "run/plog/d.log",
                    "debug/device-0/e.log", "debug/device-x1/f.log", "debug/.hidden/g.log", "debug/plog/.h.log"])
    assert rel(tmp_path, walk_matches(str(tmp_path), "debug/plog/*.log").files) == ["debug/plog/a.log"]
    assert rel(tmp_path, walk_matches(str(tmp_path), "debug/device-*/*.log").files) == [
        "debug/device-0/e.log", "debug/device-x1/f.log"]
    assert rel(tmp_path, walk_matches(str(tmp_path), "**/*.log").files) == [
        "debug/device-0/e.log", "debug/device-x1/f.log", "debug/plog/a.log", "debug/plog/deep/c.log",
        "run/plog/d.log"]
    assert rel(tmp_path, walk_matches(str(tmp_path), "debug/.hidden/*.log").files) == ["debug/.hidden/g.log"]


def test_symlink_loops_under_double_star_end_quickly(tmp_path: Path) -> None:
    tree(tmp_path, ["jobs/a/train.log"])
    (tmp_path / "jobs" / "loop1").symlink_to(".")
    (tmp_path / "jobs" / "a" / "loop2").symlink_to("..")
    started = time.monotonic()
    result = walk_matches(str(tmp_path), "jobs/**/*.log")
    assert time.monotonic() - started < 1.0
    assert rel(tmp_path, result.files) == ["jobs/a/train.log"]
    assert result.capped is None
    assert result.entries < 20


def test_the_entry_budget_stops_a_huge_tree_and_says_so(tmp_path: Path) -> None:
    for i in range(30):
        tree(tmp_path, [f"d{i:02}/x.log"])
    result = walk_matches(str(tmp_path), "**/*.log", max_entries=25)
    assert result.capped is not None and "25" in result.capped
    assert len(result.files) < 30
    complete = walk_matches(str(tmp_path), "**/*.log", max_entries=61)
    assert complete.capped is None and len(complete.files) == 30


def test_the_tailer_reports_a_capped_walk(tmp_path: Path) -> None:
    for i in range(10):
        tree(tmp_path, [f"jobs/d{i}/x.log"])
    tailer = LogTailer([tmp_path], globs=["jobs/**/*.log"], max_walk_entries=5)
    list(tailer.poll())
    assert tailer.discovery_capped is not None


def test_a_log_scan_with_two_links_to_dot_finds_each_incident_once(tmp_path: Path) -> None:
    jobs = tmp_path / "jobs"
    tree(jobs, ["run1/train.log"])
    (jobs / "run1" / "train.log").write_text(EI0002)
    (jobs / "self").symlink_to(".")
    (jobs / "run1" / "up").symlink_to("..")
    collector = HcclLogCollector(paths=[], globs=[str(jobs / "**" / "*.log")], state_file=None)
    started = time.monotonic()
    collector.collect()
    assert time.monotonic() - started < 2.0
    assert sum(collector.counts.values()) == 1
    assert collector.problem is None
