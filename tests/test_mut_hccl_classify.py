"""``collectors.hccl.classify``: exact dictionaries, timestamp ranges and hint extraction (bench/mutation.py)."""

from __future__ import annotations

import json
import time

import pytest

from collectors.hccl.classify import Event, StreamClassifier, _RootConnections
from collectors.hccl.hints import Hint
from collectors.hccl.lines import parse_timestamp
from collectors.hccl.rendezvous import MAX_RANKS
from collectors.hccl.rules import classify_line


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


# --------------------------------------------------------------------------- survivors of bench/mutation.py

T0 = local(2024, 1, 1, 0, 0, 0)
UNTIMED_OTHER = "[ERROR] HCCL(1,python): [topo.cc:1] something odd"  # provisional: only the fallback code


def _events(events: list[Event]) -> list[tuple[str, float | None, int]]:
    return [(e.code, e.timestamp, e.line_no) for e in events]


def _fed(stream: StreamClassifier, lines: list[str]) -> dict[int, list[tuple[str, float | None, int]]]:
    """The events each line made final, by the number of the line fed (0: the flush), lines without any left out."""
    out = {number: _events(stream.feed(line)[0]) for number, line in enumerate(lines, 1)}
    out[0] = _events(stream.flush())
    return {number: events for number, events in out.items() if events}


def test_a_rendezvous_line_keeps_an_ascend_connect_code_but_not_a_phrased_one() -> None:
    coded = classify_line("EI0015: topo exchange timeout; EI0006: socket times out")
    assert coded is not None
    assert coded.matches == (("EI0015", "rendezvous_timeout"), ("EI0006", "connect_timeout"))
    phrased = classify_line("EI0015: topo exchange timeout; get socket timeout")
    assert phrased is not None and phrased.matches == (("EI0015", "rendezvous_timeout"),)


def test_a_line_carrying_every_hint_trigger_still_yields_its_hints() -> None:
    line = ("remote rank:[3] crimer Cluster Exception dstRank dst_rank | Peer information serverId[ (device= "
            "connect server[")
    result = classify_line(line)
    assert result is not None and result.hints == (("remote_rank", "3"),)


def test_plog_microseconds_are_millionths_of_a_second() -> None:
    # Near the epoch a float resolves nanoseconds; at today's times it could not tell 1/1e6 from 1/1000001.
    assert parse_timestamp("1970-01-02-00:00:00.000.999") == local(1970, 1, 2, 0, 0, 0) + (0 / 1e3 + 999 / 1e6)


def test_an_untimed_line_midway_between_two_distant_times_takes_the_earlier_and_comes_first() -> None:
    stream = StreamClassifier()
    lines = ["2024-01-01-00:00:00 EI0006: socket times out", "EI0002: notify times out",
             "2024-01-01-00:02:00 EI0006: socket times out"]
    assert _fed(stream, lines) == {1: [("EI0006", T0, 1)], 3: [("EI0002", T0, 2), ("EI0006", T0 + 120, 3)]}
    closer_to_next = StreamClassifier()
    lines = ["2024-01-01-00:00:00 EI0006: socket times out", "x", "EI0002: notify times out",
             "2024-01-01-00:02:00 EI0006: socket times out"]
    assert _fed(closer_to_next, lines) == {1: [("EI0006", T0, 1)],
                                           4: [("EI0006", T0 + 120, 4), ("EI0002", T0 + 120, 3)]}


def test_provisional_events_close_by_line_distance_whatever_their_order() -> None:
    # The untimed line 1 is dated by line 2 and settled after it: the provisional list holds line 2, then line 1.
    stream = StreamClassifier(block_lines=2)
    lines = [UNTIMED_OTHER, f"{ERR}other odd", "remote rank:[3] crimer", "remote rank:[3] crimer"]
    assert _fed(stream, lines) == {4: [("hccl:topo", T0, 1)]}
    assert stream.duplicates == 1  # line 2, at the flush: the same incident as line 1


def test_a_provisional_event_stays_open_over_untimed_lines_within_the_block() -> None:
    stream = StreamClassifier(block_lines=2)
    lines = [f"{ERR}something odd", "remote rank:[3] crimer", "2024-01-01-00:00:00 EI0006: socket times out"]
    assert _fed(stream, lines) == {3: [("EI0006", T0, 3)]}
    assert stream.duplicates == 1


def test_untimed_events_expire_one_by_one_dated_by_the_time_before_them() -> None:
    stream = StreamClassifier(block_lines=2)
    lines = ["2024-01-01-00:00:00 remote rank:[3] crimer", "EI0002: notify times out", "EI0013: cqe error",
             "remote rank:[4] crimer", "remote rank:[4] crimer", "remote rank:[4] crimer"]
    assert _fed(stream, lines) == {5: [("EI0002", T0, 2)], 6: [("EI0013", T0, 3)]}
    assert stream.duplicates == 0


def test_an_untimed_repeat_beyond_the_block_of_a_timed_event_counts_again() -> None:
    stream = StreamClassifier(block_lines=2)
    lines = ["2024-01-01-00:00:00 EI0006: socket times out", "x", "x", "EI0006: socket times out"]
    assert _fed(stream, lines) == {1: [("EI0006", T0, 1)], 0: [("EI0006", None, 4)]}


def test_an_untimed_phrasing_after_its_ascend_code_is_a_duplicate() -> None:
    stream = StreamClassifier()
    assert _fed(stream, ["EI0006: socket times out", "get socket timeout"]) == {0: [("EI0006", None, 1)]}
    assert stream.duplicates == 1


def test_codes_without_an_ascend_number_are_remembered_by_category() -> None:
    stream = StreamClassifier()
    stream.feed_lines([f"{ERR}something odd"])
    assert stream.state()["counted"] == {"~other": [T0, 1]}


def test_an_untimed_provisional_line_after_an_untimed_event_is_its_duplicate() -> None:
    stream = StreamClassifier()
    assert _fed(stream, ["EI0002: notify times out", UNTIMED_OTHER]) == {0: [("EI0002", None, 1)]}
    assert stream.duplicates == 1


def test_a_provisional_line_is_a_duplicate_of_an_untimed_event_just_after_it() -> None:
    stream = StreamClassifier(block_lines=2)
    lines = ["2024-01-01-00:00:00 remote rank:[3] crimer", "x", UNTIMED_OTHER, "EI0002: notify times out"]
    assert _fed(stream, lines) == {0: [("EI0002", None, 4)]}
    assert stream.duplicates == 1


def test_a_provisional_line_two_minutes_after_an_event_is_its_own_incident() -> None:
    # Line 6 (indented) takes the time before it, line 5 the time after it: two minutes apart.
    stream = StreamClassifier()
    lines = ["2024-01-01-00:00:00 remote rank:[3] crimer", "x", "x", "x", UNTIMED_OTHER,
             "    EI0002: notify times out", "2024-01-01-00:02:00 remote rank:[4] crimer"]
    assert _fed(stream, lines) == {7: [("EI0002", T0, 6)], 0: [("hccl:topo", T0 + 120, 5)]}
    assert stream.duplicates == 0


def test_every_absorbed_provisional_line_is_one_duplicate() -> None:
    settled = StreamClassifier()
    settled.feed_lines(["2024-01-01-00:00:00 EI0006: socket times out", f"{ERR}something odd", f"{ERR}other odd"])
    assert settled.duplicates == 2
    closed = StreamClassifier()
    events, _ = closed.feed_lines([f"{ERR}something odd", f"{ERR}other odd",
                                   "2024-01-01-00:00:10 EI0006: socket times out"])
    assert _events(events) == [("EI0006", T0 + 10, 3)]
    assert closed.duplicates == 2


@pytest.mark.parametrize(("pieces", "found"), [(8, True), (9, False)])
def test_a_wrapped_location_is_joined_over_at_most_eight_lines(pieces: int, found: bool) -> None:
    stream = StreamClassifier(source="s")
    stream.feed("EI0006: x times out. Cluster Exception Location[IP/ID]:[10.0.0.7/")
    digits = "".join(str(n) for n in range(1, pieces))
    hints = [h for piece in [*digits, "]"] for h in stream.feed(piece)[1]]
    assert [(h.kind, h.value) for h in hints] == ([("exception_location", f"10.0.0.7/{digits}")] if found else [])


def test_root_side_without_a_total_line_expects_one_list_line_and_dates_its_hints() -> None:
    stream = StreamClassifier(source="root.log")
    lines = [f"{ERR}need connect rankNum is [3]",
             f"{ERR}connected rankinfo[LINE 0]: [0000000000000000],[0000000000000002],"]
    hints = [h for line in lines for h in stream.feed(line)[1]]
    assert hints == [Hint("missing_rank", "1", T0, "root.log")]


def test_line_hints_carry_the_stream_source() -> None:
    stream = StreamClassifier(source="s")
    assert stream.feed("2024-01-01-00:00:00 remote rank:[3] crimer")[1] == [Hint("remote_rank", "3", T0, "s")]


def test_the_root_side_block_starts_at_its_first_rendezvous_line() -> None:
    stream = StreamClassifier(block_lines=2)
    lines = [f"{ERR}EI0006: socket times out", f"{ERR}total connected num is [1],line num is [1]",
             f"{ERR}need connect rankNum is [2]", f"{ERR}connected rankinfo[LINE 0]: [0000000000000000],"]
    hints = [h for line in lines for h in stream.feed(line)[1]]
    assert [(h.kind, h.value) for h in hints] == [("missing_rank", "1")]


def test_missing_ranks_are_listed_up_to_the_rank_cap() -> None:
    at_cap = _RootConnections(1, 1, need=MAX_RANKS, lines_seen=1, connected={0})
    missing = at_cap.missing()
    assert missing is not None and (len(missing), missing[0], missing[-1]) == (MAX_RANKS - 1, 1, MAX_RANKS - 1)
    assert _RootConnections(1, 1, need=MAX_RANKS + 1, lines_seen=1).missing() is None
