"""Edges of ``collectors.bounds`` that planted bugs slipped through (bench/mutation.py)."""

from __future__ import annotations

from collectors.bounds import LIMITS, Rejection, Rejects, is_label_text


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
