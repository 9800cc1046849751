"""hccn_tool parsers against broken or hostile output: ranges, counters, label-safe states, caps."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from collectors import hccn_link_stat, hccn_net_health, hccn_optical, hccn_speed, hccn_stat
from collectors.base import ChipRef, CollectContext, ParseError
from collectors.bounds import LIMITS, Rejects, has_control_chars
from collectors.hccn_link import clean_lines
from tests.support.paths import CORPUS, corpus_file

CHIP = ChipRef(5, 0)
CTX = CollectContext()


# --- -optical ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(("line", "reason"), [
    ("temperature          : 151 C", "temperature 151 outside -40..150 C"),
    ("temperature          : -55 C", "temperature -55 outside"),
    ("Tx Power0            : -0.5 mW", "tx power -0.0005 outside 0..1 W"),
    ("Rx Power0            : 40 dBm", "rx power 10 outside 0..1 W"),
    ("Rx Power0            : 1500 mW", "rx power 1.5 outside"),
    ("Vcc                  : 33000 mV", "Vcc 33 outside 0..10 V"),
])
def test_optical_impossible_readings_are_dropped_and_reported(line: str, reason: str) -> None:
    text = f"optical info:\ntemperature : 40 C\nTx Power1 : 1.0 mW\n{line}\n"
    record = hccn_optical.parse(text)
    assert len(record.rejected) == 1 and reason in record.rejected[0].reason
    assert record.rejected[0].line_no == 4
    assert record.tx_power_watts.get("1") == pytest.approx(1e-3)  # the good lane stays
    out = hccn_optical.samples(record, CHIP, CTX)
    assert all(0 <= s.value <= 150 for s in out)
    assert ("npu_optical_rx_power_watts", "0") not in {(s.metric, dict(s.labels).get("lane")) for s in out}


def test_optical_impossible_temperature_exports_nothing() -> None:
    record = hccn_optical.parse("optical info:\ntemperature : 999 C\n")
    assert record.temperature_celsius is None
    assert hccn_optical.samples(record, CHIP, CTX) == []


def test_optical_lanes_beyond_the_cap_are_not_series() -> None:
    lanes = "".join(f"Rx Power{n} : 0.5 mW\n" for n in range(40))
    record = hccn_optical.parse("optical info:\n" + lanes + "Tx Power123456789 : 1 mW\n")
    assert sorted(record.rx_power_watts, key=int) == [str(n) for n in range(LIMITS["lanes"])]
    assert record.tx_power_watts == {}
    assert len(record.rejected) == 40 - LIMITS["lanes"] + 1
    lane_labels = {dict(s.labels)["lane"] for s in hccn_optical.samples(record, CHIP, CTX)
                   if s.metric == "npu_optical_rx_power_watts"}
    assert len(lane_labels) == LIMITS["lanes"]


# --- -stat --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("value", ["-5", "1.5", "abc", "18446744073709551616", "\u0663"])
def test_stat_counter_values_must_be_non_negative_64bit_integers(value: str) -> None:
    record = hccn_stat.parse(f"packet statistics:\nroce_rx_err_pkt_num:{value}\nroce_tx_err_pkt_num:3\n")
    assert record.counters == {"roce_tx_err_pkt_num": 3}
    assert len(record.rejected) == 1 and record.rejected[0].line_no == 2
    assert "is not a non-negative 64-bit integer" in record.rejected[0].reason


def test_stat_counter_names_are_ascii_and_bounded() -> None:
    long_name = "err_" + "x" * 70
    record = hccn_stat.parse(f"roce_err_\u00e9:4\n{long_name}:5\nmac_rx_bad_pkt_num:2\n")
    assert record.counters == {"mac_rx_bad_pkt_num": 2}
    assert [r.reason for r in record.rejected] == ["counter name is not ASCII of at most 64 characters"] * 2
    labels = [dict(s.labels)["counter"] for s in hccn_stat.samples(record, CHIP, CTX)]
    assert labels == ["mac_rx_bad_pkt_num"]


def test_stat_counter_count_is_capped() -> None:
    text = "".join(f"err_counter_{n}:1\n" for n in range(LIMITS["counters"] + 10))
    record = hccn_stat.parse(text)
    assert len(record.counters) == LIMITS["counters"]
    assert len(hccn_stat.samples(record, CHIP, CTX)) == LIMITS["counters"]
    assert record.rejected[0].reason == f"more than {LIMITS['counters']} counters"


# --- -speed, -link_stat, -net_health -----------------------------------------------------------------


def test_speed_beyond_any_port_is_a_parse_error_naming_the_line() -> None:
    assert hccn_speed.parse("Speed: 3200000 Mb/s").bytes_per_second == 400e9
    with pytest.raises(ParseError, match="speed out of range") as excinfo:
        hccn_speed.parse("\nSpeed: 3300000 Mb/s")
    assert excinfo.value.line_no == 2


def test_link_stat_count_beyond_64_bits_is_a_parse_error() -> None:
    with pytest.raises(ParseError, match="beyond a 64-bit counter"):
        hccn_link_stat.parse("link up count : 18446744073709551616\n")
    with pytest.raises(ParseError):
        hccn_link_stat.parse("link up count : " + "9" * 5000 + "\n")  # int() would raise ValueError past 4300 digits


@pytest.mark.parametrize("state", ["Fa\u00efl", "bad\x1bstate", "x" * 33])
def test_net_health_state_must_be_a_printable_label(state: str) -> None:
    with pytest.raises(ParseError):
        hccn_net_health.parse(f"net health status: {state}\n")


# --- lines shared by every hccn parser ----------------------------------------------------------------


def test_control_character_lines_are_skipped_and_reported() -> None:
    record = hccn_stat.parse("roce_rx_err_pkt_num:1\nroce_tx_err\x00_pkt_num:2\n")
    assert record.counters == {"roce_rx_err_pkt_num": 1}
    assert [(r.line_no, r.reason) for r in record.rejected] == [(2, "line too long or with control characters")]


def _clean_lines_line_by_line(text: str) -> tuple[list[tuple[int, str]], list[tuple[int | None, str]]]:
    """What ``clean_lines`` must return: every line looked at on its own (the rule it speeds up)."""
    kept, rejects = [], Rejects()
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if len(line) > LIMITS["line_chars"] or has_control_chars(line):
            rejects.add("line too long or with control characters", number, line)
            continue
        line = re.sub(r"^\[dev(?:ice)?\s*id\s*\d+\]\s*", "", line, flags=re.IGNORECASE).strip()
        if line:
            kept.append((number, line))
    return kept, [(r.line_no, r.line) for r in rejects.freeze()]


@pytest.mark.parametrize("text", [
    "packet statistics:\nmac_tx_total_oct_num:12\n\n  [devid 3] roce_rx_err_pkt_num:1  \n[DeviceId 4]\n",
    "a:1\r\nb:2\r\n",                             # CRLF: \r ends a line, it is in none
    "a:1\nb\x00c:2\nd:3\n",                       # one line with a NUL among clean ones
    "a:1\u2028b:2\nc\x85d:3\x1ce:4\n",             # separators splitlines knows besides \n
    "a:1\n" + "x" * (LIMITS["line_chars"] + 1) + ":1\nb:2\n",  # a line too long in clean text
    "[devid 1]\x1b[31mred:1\n[xdevid 2]a:1\n",
    "",
    "\n\n\n",
])
def test_clean_lines_looks_at_the_whole_text_once_and_still_judges_each_line(text: str) -> None:
    rejects = Rejects()
    assert (clean_lines(text, rejects), [(r.line_no, r.line) for r in rejects.freeze()]) == \
        _clean_lines_line_by_line(text)


_PLAIN = "packet statistics:\nmac_tx_pfc_pkt_num:12\nmac_tx_total_oct_num:98765432100\nroce_rx_err_pkt_num:0\n"


@pytest.mark.parametrize("text", [
    _PLAIN,
    _PLAIN.removesuffix("\n"),                                   # no newline at the end
    _PLAIN.removeprefix("packet statistics:\n"),                 # no header
    "a:1\na:2\nb:3\n",                                           # a name twice: the last value, the first place
    f"a:{2**64 - 1}\n",                                          # the largest counter there is
    f"a:{2**64}\n",                                              # one past it: refused
    "a" * 64 + ":1\n" + "b" * 65 + ":1\n",                       # a name one character too long
    "".join(f"c{i}:1\n" for i in range(LIMITS["counters"])),     # as many counters as kept
    "".join(f"c{i}:1\n" for i in range(LIMITS["counters"] + 1)),  # one more: refused
    "packet statistics:\n\na:1\n",                               # a blank line
    "packet statistics:\r\na:1\r\n",                             # CRLF
    "[devid 0]a:1\n",
    "a: 1\nb :2\n",                                              # the 950 port's spacing
    "a:1\nb:-2\nc:0x10\n",
    "packet statistics:\nheader two:\na:1\n",
    "x:1\nsome prose\nmore prose\n",
])
def test_a_plain_listing_is_read_in_one_pass_exactly_as_line_by_line(text: str) -> None:
    plain = hccn_stat._parse_plain(text)
    try:
        expected = hccn_stat._parse_lines(text)
    except ParseError:
        assert plain is None
        return
    assert plain is None or plain == expected
    assert hccn_stat.parse(text) == expected


@pytest.mark.parametrize("text", [
    _PLAIN,
    CORPUS / "tools" / "hccn_tool_-stat_-g__910A-roce-err-counters-only__src-mindcluster-faultdiag-kgparse.txt",
])
def test_what_hccn_tool_prints_takes_the_one_pass_read(text: str | Path) -> None:
    if isinstance(text, Path):
        text = corpus_file(text).read_text()
    assert hccn_stat._parse_plain(text) is not None
