"""The log scanner's incident window: which local ranks timed out in which communicator, which
peers the hints near those failures blame, bounded and expiring (collectors.hccl.incident_window)."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agent.demo.plog import HcclTimeout, append_plog, comm_init_line, hccl_timeout_lines, plog_timestamp
from collectors.base import Sample
from collectors.hccl.collector import HcclLogCollector
from collectors.hccl.facts import CollectiveFailure, InitTimeout, RankIdentity
from collectors.hccl.hints import ATTACH_WINDOW_S, Hint
from collectors.hccl.incident_window import (
    MAX_BLAMED,
    MAX_COMM_LABEL,
    MAX_COMMS,
    RANK_RETENTION_S,
    IncidentWindow,
    comm_label,
)

T0 = 1_760_000_000.0
GROUP = "29.1.0.10%enp_60000_0_1761275812718970"


class Clock:
    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def series(samples: list[Sample], metric: str) -> dict[tuple[tuple[str, str], ...], float]:
    return {s.labels: s.value for s in samples if s.metric == metric}


def labels(**values: str) -> tuple[tuple[str, str], ...]:
    return tuple(values.items())


def scanner(root: Path, clock: Clock, **kwargs: float) -> HcclLogCollector:
    return HcclLogCollector(paths=[root], globs=["debug/plog/*.log", "run/plog/*.log"],
                            state_file=root / "state.json", clock=clock, **kwargs)  # type: ignore[arg-type]


def victim(rank: int, device: int, at: float, *, pid: int = 100) -> HcclTimeout:
    """A rank that timed out waiting for rank 5 (device IP 29.3.1.11), whose heartbeat was lost."""
    return HcclTimeout(group=GROUP, rank=rank, rank_size=8, device=device, at=at, pid=pid, local_ip="29.1.0.10",
                       peer_ips=("29.3.1.11",), peer_ranks=(5,), peer_state="lost")


# ---------------------------------------------------------------- through the scanner


def test_a_timeout_block_exports_the_rank_its_communicator_and_the_blamed_peer(tmp_path: Path) -> None:
    clock = Clock(T0 + 30)
    append_plog(tmp_path, 100, T0, hccl_timeout_lines(victim(rank=2, device=1, at=T0)))
    out = scanner(tmp_path, clock).collect()
    assert series(out, "npu_hccl_rank_timeout_timestamp_seconds") == {
        labels(comm=GROUP, rank="2", npu="1"): pytest.approx(T0, abs=1e-3)}
    assert series(out, "npu_hccl_comm_ranks") == {labels(comm=GROUP): 8.0}
    assert series(out, "npu_hccl_rank_last_seen_timestamp_seconds") == {
        labels(comm=GROUP, rank="2", npu="1"): pytest.approx(T0, abs=1e-3)}
    # the heartbeat line is printed 60 s before the block, names the peer as IP/rank
    assert series(out, "npu_hccl_peer_blamed_timestamp_seconds") == {
        labels(comm=GROUP, how="lost", rank="5", address="29.3.1.11"): pytest.approx(T0 - 60, abs=1e-3)}
    assert series(out, "npuwatch_hccl_incident_dropped_total") == {
        labels(series="blamed_peer"): 0.0, labels(series="rank"): 0.0, labels(series="timeout"): 0.0}


def test_an_init_line_names_a_silent_rank_and_its_device(tmp_path: Path) -> None:
    clock = Clock(T0 + 30)
    append_plog(tmp_path, 300, T0 - 7200, [comm_init_line(GROUP, rank=5, rank_size=8, device=1, pid=300,
                                                          at=T0 - 7200, root_ip="29.1.0.10")], kind="run")
    out = scanner(tmp_path, clock, first_start_window_s=3 * 3600).collect()
    assert series(out, "npu_hccl_rank_last_seen_timestamp_seconds") == {
        labels(comm=GROUP, rank="5", npu="1"): pytest.approx(T0 - 7200, abs=1e-3)}
    assert series(out, "npu_hccl_rank_timeout_timestamp_seconds") == {}


def test_series_expire_after_the_window_and_ranks_after_their_retention(tmp_path: Path) -> None:
    clock = Clock(T0 + 10)
    append_plog(tmp_path, 100, T0, hccl_timeout_lines(victim(rank=2, device=1, at=T0)))
    logs = scanner(tmp_path, clock, incident_window_s=600)
    assert series(logs.collect(), "npu_hccl_rank_timeout_timestamp_seconds")
    clock.now = T0 + 599
    out = logs.collect()
    assert series(out, "npu_hccl_rank_timeout_timestamp_seconds")
    assert series(out, "npu_hccl_peer_blamed_timestamp_seconds") == {}  # its line is 60 s older than the block
    clock.now = T0 + 601
    out = logs.collect()
    assert series(out, "npu_hccl_rank_timeout_timestamp_seconds") == {}
    assert series(out, "npu_hccl_rank_last_seen_timestamp_seconds")  # a rank is named once per job
    assert series(out, "npu_hccl_comm_ranks") == {labels(comm=GROUP): 8.0}
    clock.now = T0 + RANK_RETENTION_S + 1
    out = logs.collect()
    assert series(out, "npu_hccl_rank_last_seen_timestamp_seconds") == {}
    assert series(out, "npu_hccl_comm_ranks") == {}


def test_the_window_survives_a_restart(tmp_path: Path) -> None:
    clock = Clock(T0 + 10)
    append_plog(tmp_path, 100, T0, hccl_timeout_lines(victim(rank=2, device=1, at=T0)))
    first = scanner(tmp_path, clock).collect()
    again = scanner(tmp_path, clock).collect()  # nothing new to read: the state file holds the window
    for metric in ("npu_hccl_rank_timeout_timestamp_seconds", "npu_hccl_peer_blamed_timestamp_seconds",
                   "npu_hccl_rank_last_seen_timestamp_seconds", "npu_hccl_comm_ranks"):
        assert series(again, metric) == series(first, metric) != {}, metric


def test_a_hint_in_a_later_chunk_joins_the_failure_of_its_file(tmp_path: Path) -> None:
    clock = Clock(T0 + 10)
    lines = hccl_timeout_lines(victim(rank=2, device=1, at=T0))
    logs = scanner(tmp_path, clock)
    append_plog(tmp_path, 100, T0, lines[1:])  # the block first
    assert series(logs.collect(), "npu_hccl_peer_blamed_timestamp_seconds") == {}
    append_plog(tmp_path, 100, T0, lines[:1])  # then the heartbeat summary
    assert set(series(logs.collect(), "npu_hccl_peer_blamed_timestamp_seconds")) == {
        labels(comm=GROUP, how="lost", rank="5", address="29.3.1.11")}


def test_a_hint_read_before_its_failure_waits_for_it(tmp_path: Path) -> None:
    clock = Clock(T0 + 10)
    lines = hccl_timeout_lines(victim(rank=2, device=1, at=T0))
    logs = scanner(tmp_path, clock)
    append_plog(tmp_path, 100, T0, lines[:1])  # the heartbeat summary first
    assert series(logs.collect(), "npu_hccl_peer_blamed_timestamp_seconds") == {}
    append_plog(tmp_path, 100, T0, lines[1:])  # then the block
    assert set(series(logs.collect(), "npu_hccl_peer_blamed_timestamp_seconds")) == {
        labels(comm=GROUP, how="lost", rank="5", address="29.3.1.11")}


def test_a_hint_far_from_any_failure_of_its_file_blames_nobody(tmp_path: Path) -> None:
    clock = Clock(T0 + 10)
    lines = hccl_timeout_lines(victim(rank=2, device=1, at=T0))
    far = lines[0].replace(plog_timestamp(T0 - 60), plog_timestamp(T0 - ATTACH_WINDOW_S - 61))
    assert far != lines[0]
    append_plog(tmp_path, 100, T0, [far, *lines[1:]])
    out = scanner(tmp_path, clock).collect()
    assert series(out, "npu_hccl_rank_timeout_timestamp_seconds")
    assert series(out, "npu_hccl_peer_blamed_timestamp_seconds") == {}


def test_a_hint_in_another_file_blames_nobody(tmp_path: Path) -> None:
    clock = Clock(T0 + 10)
    lines = hccl_timeout_lines(victim(rank=2, device=1, at=T0))
    append_plog(tmp_path, 100, T0, lines[1:])
    append_plog(tmp_path, 101, T0, lines[:1])
    assert series(scanner(tmp_path, clock).collect(), "npu_hccl_peer_blamed_timestamp_seconds") == {}


# ---------------------------------------------------------------- the window itself


def test_a_rendezvous_timeout_blames_the_missing_ranks_and_times_out_the_process_rank() -> None:
    window = IncidentWindow()
    window.feed("f", [RankIdentity(GROUP, 0, 8, device=0, pid=7, timestamp=T0 - 200, shape="comm_init"),
                      InitTimeout("root", GROUP, expected=8, connected=(0, 2, 4, 6), missing=(1, 3, 5, 7),
                                  pid=7, timestamp=T0)], [], T0)
    out = window.samples(T0 + 1)
    assert series(out, "npu_hccl_rank_timeout_timestamp_seconds") == {labels(comm=GROUP, rank="0", npu="0"): T0}
    assert set(series(out, "npu_hccl_peer_blamed_timestamp_seconds")) == {
        labels(comm=GROUP, how="missing", rank=str(rank), address="") for rank in (1, 3, 5, 7)}


def test_a_failure_names_its_remote_rank_and_takes_the_device_of_its_rank() -> None:
    window = IncidentWindow()
    window.feed("f", [RankIdentity(GROUP, 3, 8, device=6, pid=7, timestamp=T0 - 900, shape="comm_init"),
                      CollectiveFailure(GROUP, "AllReduce", 3, T0, remote_rank=4, pid=7)], [], T0)
    out = window.samples(T0 + 1)
    assert series(out, "npu_hccl_rank_timeout_timestamp_seconds") == {labels(comm=GROUP, rank="3", npu="6"): T0}
    assert series(out, "npu_hccl_peer_blamed_timestamp_seconds") == {
        labels(comm=GROUP, how="waited_on", rank="4", address=""): T0}


def test_a_failure_without_a_group_or_rank_exports_no_timeout() -> None:
    window = IncidentWindow()
    window.feed("f", [CollectiveFailure(None, None, 3, T0), CollectiveFailure(GROUP, None, None, T0)],
                [(Hint("remote_rank", "1", T0), "remote rank:[1]")], T0)
    out = window.samples(T0 + 1)
    assert series(out, "npu_hccl_rank_timeout_timestamp_seconds") == {}
    # the hint is near the grouped failure, so it is still tied to that communicator
    assert set(series(out, "npu_hccl_peer_blamed_timestamp_seconds")) == {
        labels(comm=GROUP, how="waited_on", rank="1", address="")}


def test_a_long_group_tag_is_cut_with_a_stable_hash() -> None:
    short = "g" * MAX_COMM_LABEL
    assert comm_label(short) == short
    long_a, long_b = "a" * 300 + "x", "a" * 300 + "y"
    assert len(comm_label(long_a)) == MAX_COMM_LABEL
    assert comm_label(long_a) == comm_label("a" * 300 + "x")
    assert comm_label(long_a) != comm_label(long_b)
    assert comm_label(long_a).startswith("a" * 100)


def _blame(window: IncidentWindow, comm: str, rank: int, at: float) -> None:
    window.feed(comm, [CollectiveFailure(comm, "AllReduce", None, at)],
                [(Hint("remote_rank", str(rank), at), f"remote rank:[{rank}]")], at)


def test_blamed_peers_past_the_bound_are_counted_as_dropped_and_the_newest_stay() -> None:
    window = IncidentWindow()
    for rank in range(MAX_BLAMED + 8):
        _blame(window, GROUP, rank, T0 + rank)
    out = window.samples(T0 + 100)
    blamed = series(out, "npu_hccl_peer_blamed_timestamp_seconds")
    assert len(blamed) == MAX_BLAMED
    assert min(int(dict(key)["rank"]) for key in blamed) == 8
    assert series(out, "npuwatch_hccl_incident_dropped_total")[labels(series="blamed_peer")] == 8.0


def test_communicators_past_the_bound_push_out_the_oldest() -> None:
    window = IncidentWindow()
    for index in range(MAX_COMMS + 3):
        _blame(window, f"comm-{index:02d}", 1, T0 + index)
    _blame(window, "comm-late-but-old", 1, T0 - 50)  # older than every comm kept: it is the one dropped
    out = window.samples(T0 + 100)
    comms = {dict(key)["comm"] for key in series(out, "npu_hccl_peer_blamed_timestamp_seconds")}
    assert comms == {f"comm-{index:02d}" for index in range(3, MAX_COMMS + 3)}
    assert series(out, "npuwatch_hccl_incident_dropped_total")[labels(series="blamed_peer")] == 4.0


@settings(max_examples=60, deadline=None, derandomize=True)
@given(st.lists(st.tuples(st.integers(0, 40), st.integers(0, 100), st.floats(0, 5000)), max_size=120))
def test_the_bounds_hold_for_any_blame_sequence(events: list[tuple[int, int, float]]) -> None:
    window = IncidentWindow(window_s=3600)
    for comm, rank, offset in events:
        _blame(window, f"c{comm}", rank, T0 + offset)
    out = window.samples(T0 + 5000)
    blamed = series(out, "npu_hccl_peer_blamed_timestamp_seconds")
    assert len(blamed) <= MAX_BLAMED
    assert len({dict(key)["comm"] for key in blamed}) <= MAX_COMMS
    assert all(at >= T0 + 5000 - 3600 for at in blamed.values())
    current = {(f"c{comm}", str(rank)) for comm, rank, offset in events if offset >= 5000 - 3600}
    kept = {(dict(key)["comm"], dict(key)["rank"]) for key in blamed}
    assert kept <= current
    if len(current) <= MAX_BLAMED and len({comm for comm, _ in current}) <= MAX_COMMS:
        # only what had expired anyway was pushed out: an expired entry is older than any current one
        assert kept == current
