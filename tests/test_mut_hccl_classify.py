"""``collectors.hccl_classify``: exact dictionaries, timestamp ranges and hint extraction (bench/mutation.py)."""

from __future__ import annotations

import json
import time

import pytest

from collectors.hccl_classify import Event, Hint, StreamClassifier, classify_line, parse_timestamp


def local(*fields: int) -> float:
    """Epoch seconds of local (year, month, day, hour, minute, second)."""
    return time.mktime((*fields, 0, 0, -1))


def test_hint_and_event_dictionaries() -> None:
    hint = Hint("remote_rank", "4", 12.5, "job.log")
    assert hint.to_dict() == {"kind": "remote_rank", "value": "4", "timestamp": 12.5, "source": "job.log"}
    event = Event("EI0006", "socket_timeout", 10.0, "text", "job.log", 7, (hint,))
    assert event.to_dict() == {"code": "EI0006", "category": "socket_timeout", "timestamp": 10.0, "text": "text",
                               "source": "job.log", "line_no": 7,
                               "hints": [{"kind": "remote_rank", "value": "4"}]}


@pytest.mark.parametrize(("stamp", "valid"), [
    ("2024-12-31-23:59:59", True), ("2024-01-01-00:00:00", True), ("2024-12-31-23:59:61", True),
    ("2024-13-01-00:00:00", False), ("2024-00-01-00:00:00", False), ("2024-01-32-00:00:00", False),
    ("2024-01-00-00:00:00", False), ("2024-01-01-24:00:00", False), ("2024-01-01-00:60:00", False),
    ("2024-01-01-00:00:62", False),
])
def test_plog_timestamp_field_ranges(stamp: str, valid: bool) -> None:
    assert (parse_timestamp(f"[ERROR] HCCL(1,python):{stamp}.000.000 x") is not None) is valid


def test_plog_timestamp_fraction_and_seconds() -> None:
    assert parse_timestamp("2024-03-28-10:25:50.589.610") == local(2024, 3, 28, 10, 25, 50) + 589 / 1e3 + 610 / 1e6
    assert parse_timestamp("2024-03-28-10:25:50") == local(2024, 3, 28, 10, 25, 50)


def test_glog_fraction_is_added() -> None:
    ref = local(2024, 3, 30, 0, 0, 0)
    assert parse_timestamp("E0324 13:00:25.428 x", ref) == pytest.approx(local(2024, 3, 24, 13, 0, 25) + 0.428,
                                                                      abs=1e-6)


def test_year_rollover_threshold_is_two_days_after_the_reference() -> None:
    ref = local(2024, 6, 10, 12, 0, 0)
    inside = "E0612 11:59:59 x"  # 1 day 23:59:59 after the reference: this year
    assert parse_timestamp(inside, ref) == local(2024, 6, 12, 11, 59, 59)
    edge = "E0612 12:00:00 x"  # exactly 2 days after: still this year
    assert parse_timestamp(edge, ref) == local(2024, 6, 12, 12, 0, 0)
    beyond = "E0612 12:00:01 x"  # more than 2 days after: last year's line
    assert parse_timestamp(beyond, ref) == local(2023, 6, 12, 12, 0, 1)
    assert parse_timestamp("E0609 12:00:00 x", ref) == local(2024, 6, 9, 12, 0, 0)


def test_syslog_takes_the_reference_year() -> None:
    ref = local(2023, 8, 2, 0, 0, 0)
    assert parse_timestamp("Aug  1 08:38:31 host kernel: x", ref) == local(2023, 8, 1, 8, 38, 31)


def test_failed_agents_become_missing_rank_hints_once_each() -> None:
    result = classify_line("[ERROR] HCCL(1,python):2024-03-28-10:25:50.589.610 [a.cc:1] "
                           "Failed to connect agent[3, 5,,3 ,7] timeout")
    assert result is not None
    assert [h for h in result.hints if h[0] == "missing_rank"] == [
        ("missing_rank", "3"), ("missing_rank", "5"), ("missing_rank", "7")]
    listed = classify_line("[ERROR] HCCL(1,x):2024-03-28-10:25:50 connectFailedAgentIdList[9] failed")
    assert listed is not None and ("missing_rank", "9") in listed.hints
    unlisted = classify_line("[ERROR] HCCL(1,x):2024-03-28-10:25:50 connect agent failed")
    assert unlisted is None or not any(kind == "missing_rank" for kind, _ in unlisted.hints)


def test_a_link_error_row_blames_its_first_peer_only() -> None:
    result = classify_line("EI0012: | 10.0.0.1(3) | x | 10.0.0.2(4) | link error timeout")
    assert result is not None
    assert [h for h in result.hints if h[0] == "link_peer"] == [("link_peer", "10.0.0.1/3")]


def test_hints_skip_placeholder_values_and_duplicates() -> None:
    result = classify_line("EI0006: Getting socket times out. remote rank:[4] remoteRank[4] remote rank:[-1]")
    assert result is not None
    assert [h for h in result.hints if h[0] == "remote_rank"] == [("remote_rank", "4")]


def test_root_server_hint_joins_host_and_port() -> None:
    result = classify_line("EI0015: timeout connect server[ 10.0.0.9 : 60000 ] failed")
    assert result is not None
    assert ("root_server", "10.0.0.9:60000") in result.hints


@pytest.mark.parametrize("advice", ["Possible Cause: the peer died. EI0006 timeout",
                                    "Solution: check EI0006 timeout",
                                    "(Please search EI0006: for help) socket times out"])
def test_advice_lines_are_not_incidents(advice: str) -> None:
    assert classify_line(advice) is None


def test_prefixes_are_stripped_up_to_three_deep_and_indentation_is_kept() -> None:
    line = "(RayWorker pid=1) [rank2]: [default0]: EI0006: [PID: 1] 2024-01-01-00:00:00 socket times out"
    result = classify_line(line)
    assert result is not None and result.text.startswith("EI0006:")
    indented = classify_line("[rank2]:     EI0006: 2024-01-01-00:00:00 socket times out")
    assert indented is not None and indented.indented is True
    flush = classify_line("[rank2]: EI0006: 2024-01-01-00:00:00 socket times out")
    assert flush is not None and flush.indented is False
    four = classify_line("(a pid=1) (b pid=2) (c pid=3) (d pid=4) EI0006: x times out")
    assert four is not None and four.text.startswith("(d pid=4)")
    bare = classify_line("  EI0006: socket times out  ")
    assert bare is not None and bare.indented is True and bare.text == "EI0006: socket times out"


def test_classify_line_uses_the_reference_time_and_keeps_hint_only_lines() -> None:
    ref = local(2024, 3, 30, 0, 0, 0)
    result = classify_line("E0324 13:00:25 EI0006: socket times out", ref)
    assert result is not None and result.timestamp == local(2024, 3, 24, 13, 0, 25)
    hint_only = classify_line("[INFO] HCCL(1,x): crimer rank [12] is the one")
    assert hint_only is not None and hint_only.matches == () and ("crimer_rank", "12") in hint_only.hints


# --------------------------------------------------------------------------- StreamClassifier

ERR = "[ERROR] HCCL(1,python):2024-01-01-00:00:00.000.000 [topo.cc:1] "


def test_state_round_trip_is_exact_and_defaults_fill_gaps() -> None:
    stream = StreamClassifier(source="s")
    stream.feed("EI0006: 2024-01-01-00:00:00 socket times out")
    stream.feed("untimed EI0002: notify times out")
    stream.flush()
    state = stream.state()
    assert set(state) == {"line_no", "last_ts", "last_ts_line", "counted"}
    assert state["line_no"] == 2 and state["last_ts_line"] == 1
    assert state["last_ts"] == local(2024, 1, 1, 0, 0, 0)
    assert state["counted"]["EI0006"] == [local(2024, 1, 1, 0, 0, 0), 1]
    again = StreamClassifier.from_state(json.loads(json.dumps(state)), source="t")
    assert again.state() == state
    assert again.source == "t"
    partial = StreamClassifier.from_state({"counted": {"EI0006": [None, "3"]}})
    assert partial.state() == {"line_no": 0, "last_ts": None, "last_ts_line": -(10**9),
                               "counted": {"EI0006": [None, 3]}}
    assert StreamClassifier.from_state({"line_no": "x"}, source="u").state()["line_no"] == 0
    assert StreamClassifier.from_state({"line_no": 5}).state()["line_no"] == 5
    assert StreamClassifier.from_state({"counted": {"k": [1.0]}}).state()["counted"] == {}
    assert StreamClassifier.from_state(None, block_lines=7).block_lines == 7
    assert StreamClassifier.from_state({"line_no": "bad"}, block_lines=7).block_lines == 7


def test_a_wrapped_exception_location_is_joined_within_the_pending_lines() -> None:
    stream = StreamClassifier(source="s")
    _, first = stream.feed("2024-01-01-00:00:00 EI0006: socket times out. Cluster Exception Location[IP/ID]:[10.0.")
    _, second = stream.feed("0.7/3]")
    assert [(h.kind, h.value, h.source) for h in first + second if h.kind == "exception_location"] == [
        ("exception_location", "10.0.0.7/3", "s")]
    assert [h.timestamp for h in second] == [local(2024, 1, 1, 0, 0, 0)]


def test_an_unfinished_exception_location_is_dropped_after_the_pending_lines() -> None:
    stream = StreamClassifier()
    stream.feed("EI0006: x times out. Cluster Exception Location[IP/ID]:[10.0.")
    hints = [h for _ in range(10) for h in stream.feed("0")[1]]
    assert hints == []
    assert stream._pending == "" and stream._pending_lines == 0


def test_root_side_connected_lists_name_the_missing_ranks() -> None:
    stream = StreamClassifier(source="root.log")
    lines = [f"{ERR}EI0015: topo exchange timeout, total connected num is [2],line num is [1]",
             f"{ERR}need connect rankNum is [4]",
             f"{ERR}connected rankinfo[LINE 0]: [0000000000000000],[0000000000000002],"]
    hints = [h for line in lines for h in stream.feed(line)[1]]
    assert [(h.kind, h.value, h.source) for h in hints if h.kind == "missing_rank"] == [
        ("missing_rank", "1", "root.log"), ("missing_rank", "3", "root.log")]
    assert stream._root is None


def test_root_side_lists_too_far_apart_start_over() -> None:
    stream = StreamClassifier(block_lines=2)
    stream.feed(f"{ERR}total connected num is [1],line num is [1]")
    stream.feed(f"{ERR}need connect rankNum is [2]")
    _, hints = stream.feed(f"{ERR}connected rankinfo[LINE 0]: [0000000000000000],")
    assert [h.value for h in hints if h.kind == "missing_rank"] == ["1"]  # 2 lines on: still one block
    stream.feed(f"{ERR}total connected num is [1],line num is [1]")
    stream.feed(f"{ERR}need connect rankNum is [2]")
    stream.feed("filler")
    stream.feed("filler")
    _, late = stream.feed(f"{ERR}connected rankinfo[LINE 0]: [0000000000000000],")
    assert [h for h in late if h.kind == "missing_rank"] == []


def test_untimed_lines_inherit_the_last_time_within_block_lines_only() -> None:
    stream = StreamClassifier(block_lines=2)
    stream.feed("2024-01-01-00:00:00 EI0006: socket times out")
    _, near = stream.feed("remote rank:[3] crimer")
    stream.feed("x")
    _, far = stream.feed("remote rank:[5] crimer")
    assert [h.timestamp for h in near] == [local(2024, 1, 1, 0, 0, 0)]
    assert [h.timestamp for h in far] == [None]


@pytest.mark.parametrize(("gap", "expired_at"), [(3, None), (4, 5)])
def test_an_untimed_event_is_final_once_block_lines_have_passed(gap: int, expired_at: int | None) -> None:
    stream = StreamClassifier(block_lines=3)
    finals = [stream.feed("EI0002: notify times out")[0]]
    finals += [stream.feed("remote rank:[3] crimer")[0] for _ in range(gap)]
    settled = [(line, [(e.code, e.line_no) for e in events]) for line, events in enumerate(finals, 1) if events]
    assert settled == ([] if expired_at is None else [(expired_at, [("EI0002", 1)])])


def test_duplicates_are_counted_per_absorbed_line() -> None:
    stream = StreamClassifier()
    events, _ = stream.feed_lines([f"{ERR}something odd", "EI0006: 2024-01-01-00:00:10 socket times out"])
    assert [(e.code, e.line_no) for e in events] == [("EI0006", 2)]
    assert stream.duplicates == 1
    timed = StreamClassifier()
    events, _ = timed.feed_lines(["EI0006: 2024-01-01-00:00:00 socket times out",
                                  "EI0006: 2024-01-01-00:01:00 socket times out",
                                  "EI0006: 2024-01-01-00:01:01 socket times out"])
    assert [(e.code, e.line_no) for e in events] == [("EI0006", 1), ("EI0006", 3)]
    assert timed.duplicates == 1
    untimed = StreamClassifier(block_lines=2)
    events, _ = untimed.feed_lines(["EI0002: notify times out", "remote rank:[1] crimer", "EI0002: notify times out",
                                    "remote rank:[1] crimer", "remote rank:[1] crimer", "EI0002: notify times out"])
    assert [(e.code, e.line_no) for e in events] == [("EI0002", 1), ("EI0002", 6)]
    assert untimed.duplicates == 1


def test_inheritance_reaches_exactly_block_lines() -> None:
    stream = StreamClassifier(block_lines=2)
    stream.feed("2024-01-01-00:00:00 EI0006: socket times out")
    stream.feed("x")
    _, edge = stream.feed("remote rank:[3] crimer")
    assert [h.timestamp for h in edge] == [local(2024, 1, 1, 0, 0, 0)]


def test_fallback_code_names_the_file_after_the_header_cut_to_48_characters() -> None:
    result = classify_line(f"[foo.cc:1] {ERR.replace('topo', 'bar')}something odd")
    assert result is not None and result.matches == (("hccl:bar", "other"),)
    long_name = "a" * 60
    cut = classify_line(f"[ERROR] HCCL(1,x):2024-01-01-00:00:00.000.000 [{long_name}.cc:2] something odd")
    assert cut is not None and cut.matches == ((f"hccl:{'a' * 48}", "other"),)


def test_the_stream_dates_year_less_lines_with_its_reference_time() -> None:
    stream = StreamClassifier(ref_time=local(2023, 3, 30, 0, 0, 0), source="f")
    events, _ = stream.feed_lines(["E0324 13:00:25 EI0006: socket times out"])
    assert [(e.timestamp, e.source) for e in events] == [(local(2023, 3, 24, 13, 0, 25), "f")]


def test_a_complete_location_is_not_held_for_the_next_line() -> None:
    stream = StreamClassifier()
    _, first = stream.feed("EI0006: x times out. Cluster Exception Location[IP/ID]:[10.0.0.7/3]")
    _, second = stream.feed("Cluster Exception Location[IP/ID]:[10.0.0.8/4]")
    assert [h.value for h in first + second if h.kind == "exception_location"] == ["10.0.0.7/3", "10.0.0.8/4"]
    assert stream._pending == ""


def test_indentation_is_one_blank_and_an_empty_rest_is_nothing() -> None:
    single = classify_line(" EI0006: socket times out")
    assert single is not None and single.indented is True
    under = classify_line("[rank2]:  EI0006: socket times out")
    assert under is not None and under.indented is True and under.text == "EI0006: socket times out"
    assert classify_line("(EI pid=1)") is None
