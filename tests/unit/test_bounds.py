"""The shared limits parsers apply to tool output (``collectors.bounds``) and ParseError's clipped line."""

from __future__ import annotations

import math

import pytest

from collectors.base import ParseError
from collectors.bounds import (
    BOUNDS,
    LIMITS,
    Rejection,
    Rejects,
    RowList,
    RowTuple,
    clip,
    has_control_chars,
    is_label_text,
    rejections,
)


def test_every_bound_is_an_ordered_range_with_a_reason() -> None:
    for name, bound in BOUNDS.items():
        assert bound.low < bound.high, name
        assert len(bound.why) > 20, name
    assert LIMITS["max_chips"] == 64


@pytest.mark.parametrize(("name", "inside", "outside"), [
    ("power_watts", [0, 93.4, 2000], [-0.1, 2000.1, math.inf, math.nan]),
    ("temperature_celsius", [-40, 0, 150], [-40.5, 151, 65535]),
    ("percent", [0, 100], [-1, 100.5]),
    ("memory_bytes", [0, 1 << 40], [-1, (1 << 40) + 1]),
    ("frequency_hertz", [0, 1.8e9, 10e9], [-1, 10e9 + 1]),
    ("counter", [0, 2**64 - 1], [-1, 2**64 + 4096]),
])
def test_bounds_are_inclusive_and_refuse_non_finite(name: str, inside: list[float], outside: list[float]) -> None:
    bound = BOUNDS[name]
    assert all(bound.contains(value) for value in inside)
    assert not any(bound.contains(value) for value in outside)


def test_rejects_drops_out_of_range_values_and_names_the_line() -> None:
    rejects = Rejects()
    assert rejects.value("power_watts", 93.4, 3, "Power : 93.4") == 93.4
    assert rejects.value("power_watts", None, 4, "Power : NA") is None
    assert rejects.value("power_watts", -5, 5, "Power : -5", "NPU Real-time Power(W)") is None
    assert len(rejects) == 1
    (rejection,) = rejects.freeze()
    assert rejection == Rejection(5, "Power : -5", "NPU Real-time Power(W) -5 outside 0..2000 W")
    assert str(rejection) == "NPU Real-time Power(W) -5 outside 0..2000 W (line 5: 'Power : -5')"


def test_rejects_keeps_a_bounded_list_and_counts_the_rest() -> None:
    rejects = Rejects()
    for line_no in range(1000):
        rejects.add("bad", line_no, "x" * 5000)
    frozen = rejects.freeze()
    assert len(frozen) == LIMITS["rejections"] + 1
    assert frozen[-1].reason == f"{1000 - LIMITS['rejections']} more rejections not listed"
    assert all(len(r.line) <= 80 for r in frozen)
    assert len(rejects) == 1000


def test_rejects_error_names_the_first_rejected_line() -> None:
    rejects = Rejects()
    assert str(rejects.error("nothing usable")) == "nothing usable"
    rejects.add("NPU ID 'x' is not an integer", 7, "| x 910B3 | OK |")
    rejects.add("second", 9, "| y |")
    error = rejects.error("no valid chip row")
    assert (error.line_no, error.line) == (7, "| x 910B3 | OK |")
    assert str(error).startswith("no valid chip row: NPU ID 'x' is not an integer (line 7")


def test_parse_error_clips_a_huge_line() -> None:
    error = ParseError("bad", 1, "y" * (4 << 20))
    assert error.line is not None and len(error.line) == 80 and error.line.endswith("...")
    assert len(str(error)) < 120
    assert ParseError("bad", 2, "short").line == "short"


def test_label_text_is_printable_ascii_of_bounded_length() -> None:
    assert is_label_text("910B3") and is_label_text("") and is_label_text("a b-c_d.e/1:2")
    assert not is_label_text("a" * 65)
    assert is_label_text("a" * 65, max_chars=100)
    for bad in ("a\x00", "\x1b[31m", "tab\there", "caf\u00e9", "\ufffd", "x\x7f", "new\nline"):
        assert not is_label_text(bad), repr(bad)


def test_control_chars_allow_tab_but_nothing_else() -> None:
    assert not has_control_chars("\tHBM Capacity(MB) : 64 \u00e9\ufffd")
    for bad in ("\x00", "\x1b", "\x7f", "\x85", "\u2028", "\r"):
        assert has_control_chars(f"a{bad}b"), repr(bad)


def test_clip() -> None:
    assert clip("abc") == "abc"
    assert clip("a" * 80) == "a" * 80
    assert clip("a" * 81) == "a" * 77 + "..."
    assert clip("910\x1b[2J\x00") == "910\\x1b[2J\\x00"  # no raw control character reaches a terminal
    assert clip("\x00" * 100) == "\\x00" * 19 + "\\..."
    assert clip("a\u2028b") == "a\\u2028b"


def test_rejections_are_found_in_any_record_shape() -> None:
    one = Rejection(1, "a", "x")
    two = Rejection(2, "b", "y")

    class Record:
        rejected = (one,)

    assert rejections(Record()) == (one,)
    assert rejections([Record(), Record()]) == (one, one)
    assert rejections((Record(),)) == (one,)
    assert rejections({"chip0": [Record()], "chip1": []}) == (one,)
    assert rejections(RowList.of([1, 2], (two,))) == (two,)
    rows = RowTuple.of((1, 2), (one, two))
    assert rows == (1, 2) and rows.rejected == (one, two)
    assert RowList.of([3], ()) == [3]
    assert rejections(None) == () and rejections("text") == ()


def test_label_text_length_limit_is_inclusive() -> None:
    limit = LIMITS["label_chars"]
    assert is_label_text("a" * limit)
    assert not is_label_text("a" * (limit + 1))
    assert is_label_text("a" * 10, max_chars=10)
    assert not is_label_text("a" * 11, max_chars=10)


def test_rejection_without_a_line_number_is_its_reason_alone() -> None:
    assert str(Rejection(None, "", "3 more rejections not listed")) == "3 more rejections not listed"
    assert str(Rejection(None, "ignored", "why")) == "why"
    assert str(Rejection(0, "", "why")) == "why (line 0: '')"


def test_rejects_defaults_leave_the_line_empty_and_name_the_bound() -> None:
    rejects = Rejects()
    rejects.add("no line given")
    assert rejects.value("power_watts", 2001.0) is None
    first, second = rejects.freeze()
    assert first == Rejection(None, "", "no line given")
    assert second == Rejection(None, "", "power_watts 2001 outside 0..2000 W")


def test_rejection_of_a_unitless_bound_has_no_trailing_blank() -> None:
    rejects = Rejects()
    assert rejects.value("counter", -1.0, 4, "Rx : -1", "rx packets") is None
    (rejection,) = rejects.freeze()
    assert rejection.reason == f"rx packets -1 outside 0..{2**64 - 1:g}"


def test_summary_of_dropped_rejections_has_no_line() -> None:
    rejects = Rejects()
    for line_no in range(LIMITS["rejections"] + 2):
        rejects.add("bad", line_no, "x")
    summary = rejects.freeze()[-1]
    assert summary == Rejection(None, "", "2 more rejections not listed")
    assert str(summary) == "2 more rejections not listed"
