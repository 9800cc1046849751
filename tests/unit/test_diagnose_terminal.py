"""What diagnose and scan-logs share at a terminal (``agent.core.terminal``, ``agent.core.humanize``):
the colour decision (``--color``, ``NO_COLOR``, a tty), the severity colours, the progress line, and
numbers as a person writes them."""

from __future__ import annotations

import io
import re
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agent.core.humanize import count, duration, join, plural, size
from agent.core.terminal import Progress, Style, use_color, visible_len


class Tty(io.StringIO):
    """A stream that says it is a terminal."""

    def isatty(self) -> bool:
        return True


@pytest.mark.parametrize(("choice", "tty", "env", "expected"), [
    ("auto", True, {}, True),
    ("auto", False, {}, False),  # piped or redirected
    (None, True, {}, True),
    ("auto", True, {"NO_COLOR": "1"}, False),
    ("auto", True, {"NO_COLOR": "anything"}, False),
    ("auto", True, {"NO_COLOR": ""}, True),  # no-color.org: set *and non-empty*
    ("auto", True, {"TERM": "dumb"}, False),
    ("always", False, {"NO_COLOR": "1"}, True),  # an explicit flag beats the environment
    ("never", True, {}, False),
])
def test_colour_decision(choice: str | None, tty: bool, env: dict[str, str], expected: bool) -> None:
    stream = Tty() if tty else io.StringIO()
    assert use_color(choice, stream, env) is expected


def test_a_closed_or_odd_stream_gets_no_colour() -> None:
    closed = Tty()
    closed.close()
    assert use_color("auto", object(), {}) is False
    assert use_color("auto", io.StringIO(), {}) is False


def test_severity_colours() -> None:
    style = Style(True)
    assert style.severity("FAIL") == "\x1b[1;31mFAIL\x1b[0m"  # red
    assert style.severity("WARN") == "\x1b[33mWARN\x1b[0m"  # yellow
    assert style.severity("PASS") == "\x1b[32mPASS\x1b[0m"  # green
    assert style.severity("ok") == "\x1b[32mok\x1b[0m"
    assert style.severity("UNKNOWN") == "\x1b[1;35mUNKNOWN\x1b[0m"  # bold magenta: neither FAIL nor WARN
    assert style.severity("WARN", strong=True) == "\x1b[1;33mWARN\x1b[0m"
    assert style.severity("FAIL", "FAIL   ") == "\x1b[1;31mFAIL   \x1b[0m"
    assert visible_len(style.severity("UNKNOWN")) == len("UNKNOWN")


def test_no_colour_leaves_text_alone() -> None:
    style = Style(False)
    for word in ("FAIL", "WARN", "PASS", "ok", "UNKNOWN"):
        assert style.severity(word) == word
    assert style.bold("x") == "x"


def test_progress_draws_on_a_terminal_and_erases_itself() -> None:
    stream = Tty()
    with Progress("diagnose", stream, interval_s=0.01) as progress:
        progress.update("12/40 npu-smi and hccn_tool calls")
        progress("probe_gemm: exec 1/1")
        deadline = time.monotonic() + 5
        while "probe_gemm" not in stream.getvalue() and time.monotonic() < deadline:
            time.sleep(0.01)  # the spinner's thread draws the latest text at its next turn
    written = stream.getvalue()
    assert "diagnose: probe_gemm: exec 1/1 (" in written
    assert written.endswith("\r\x1b[K")  # the output that follows starts on a clean line
    frames = [part for part in written.split("\r\x1b[K") if part]
    assert frames and all(re.fullmatch(r"[|/\\-] diagnose(: .*)? \(\d+\.\d s\)", frame) for frame in frames)


def test_progress_is_silent_when_piped() -> None:
    stream = io.StringIO()
    with Progress("scan-logs", stream) as progress:
        progress.update("3 files")
    assert stream.getvalue() == ""


def test_progress_survives_a_vanished_terminal() -> None:
    stream = Tty()
    stream.close()
    with Progress("diagnose", stream, enabled=True) as progress:
        progress.update("x")
    assert progress.enabled is False


@pytest.mark.parametrize(("seconds", "text"), [
    (0, "0 s"), (0.04, "40 ms"), (0.8, "0.8 s"), (3, "3 s"), (45, "45 s"), (90, "1 min 30 s"), (600, "10 min"),
    (3600, "1 h"), (5400, "1 h 30 min"), (7200, "2 h"), (100800, "28 h"), (3 * 86400, "3 d"),
    (3 * 86400 + 4 * 3600, "3 d 4 h"),
])
def test_durations(seconds: float, text: str) -> None:
    assert duration(seconds) == text


_DURATION = re.compile(r"\d+ ms|\d+(\.\d)? s|\d+ min( \d+ s)?|\d+ h( \d+ min)?|\d+ d( \d+ h)?")


@settings(derandomize=True, max_examples=300)
@given(st.floats(min_value=0, max_value=1e8, allow_nan=False))
def test_every_duration_reads_well(seconds: float) -> None:
    text = duration(seconds)
    assert _DURATION.fullmatch(text), text
    assert not re.search(r"\b60 (s|min)\b|\b0 (min|h)\b|\b[1-9]\d* h \b60\b", text), text
    if seconds >= 2 * 86400 - 30:
        assert text.endswith(("d", "h")) and "d" in text


def test_sizes_counts_and_plurals() -> None:
    assert [size(n) for n in (0, 882, 1024, 1536, 64 << 20, 3 << 30)] == [
        "0 B", "882 B", "1 KiB", "1.5 KiB", "64 MiB", "3 GiB"]
    assert count(1234567) == "1,234,567"
    assert [plural(n, "device") for n in (0, 1, 2)] == ["0 devices", "1 device", "2 devices"]
    assert plural(1, "process", "processes") == "1 process"
    assert plural(3, "process", "processes") == "3 processes"
    assert plural(1200, "line") == "1,200 lines"
    assert [join(items) for items in ([], ["a"], ["a", "b"], ["a", "b", "c"])] == ["", "a", "a and b", "a, b and c"]
