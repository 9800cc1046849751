"""The hccn_tool parsers' shared helpers and edges (bench/mutation.py)."""

from __future__ import annotations

import time
from datetime import datetime

import pytest

from collectors import hccn_link, hccn_link_stat, hccn_net_health, hccn_optical, hccn_stat
from collectors.base import ChipRef, CollectContext, ParseError, Sample, ToolError
from collectors.bounds import LIMITS, Rejects

CTX = CollectContext()


def test_device_id_prefers_phy_then_logic_then_npu() -> None:
    assert hccn_link.device_id(ChipRef(1, 0, logic_id=5, phy_id=9)) == 9
    assert hccn_link.device_id(ChipRef(1, 0, logic_id=5)) == 5
    assert hccn_link.device_id(ChipRef(1, 0)) == 1
    assert hccn_link.device_id(ChipRef(1, 0, logic_id=0, phy_id=0)) == 0
    assert hccn_link.device_id(ChipRef(1, 0, logic_id=0)) == 0


def test_hccn_argv_is_per_chip() -> None:
    argv = hccn_link.hccn_argv("link")
    assert argv(ChipRef(2, 0, phy_id=4)) == ["-i", "4", "-link", "-g"]
    with pytest.raises(ValueError, match="hccn_tool -link is a per-chip source"):
        argv(None)


def test_clean_lines_strips_devid_prefixes_and_blank_lines() -> None:
    text = "  [devid 3]  link status: UP \n\n[device id 12]\n[DEVID 1] x\nplain\n"
    assert hccn_link.clean_lines(text) == [(1, "link status: UP"), (4, "x"), (5, "plain")]


def test_clean_lines_line_length_limit_is_inclusive() -> None:
    limit = LIMITS["line_chars"]
    rejects = Rejects()
    lines = hccn_link.clean_lines("a" * limit + "\n" + "b" * (limit + 1) + "\nc\x1bd\n", rejects)
    assert lines == [(1, "a" * limit)]
    rejected = rejects.freeze()
    assert [(r.line_no, r.reason) for r in rejected] == [
        (2, "line too long or with control characters"), (3, "line too long or with control characters")]
    assert rejected[1].line == "c\\x1bd"
    assert hccn_link.clean_lines("x\x1b\n") == []  # no rejects collector: dropped all the same


def test_raise_unparsable_tells_tool_errors_from_parse_errors() -> None:
    with pytest.raises(ToolError, match=r"^hccn_tool printed nothing where the link was expected$"):
        hccn_link.raise_unparsable(" \n\n", "the link")
    with pytest.raises(ToolError) as tool_error:
        hccn_link.raise_unparsable("\nfoo\nInvalid device id\n", "the link")
    assert str(tool_error.value).startswith("hccn_tool reported an error instead of the link")
    assert (tool_error.value.line_no, tool_error.value.line) == (2, "foo")
    with pytest.raises(ParseError) as parse_error:
        hccn_link.raise_unparsable("\nsomething else\n", "the link")
    assert not isinstance(parse_error.value, ToolError)
    assert str(parse_error.value).startswith("the link not found in hccn_tool output")
    assert (parse_error.value.line_no, parse_error.value.line) == (2, "something else")


@pytest.mark.parametrize(("state", "up"), [("UP", True), ("up", True), ("DOWN", False), ("Down", False)])
def test_link_states(state: str, up: bool) -> None:
    record = hccn_link.parse(f"[devid 0] link status: {state}\n")
    assert record == hccn_link.LinkRecord(up=up, state=state)


def test_unknown_link_state_names_the_line() -> None:
    with pytest.raises(ParseError) as caught:
        hccn_link.parse("x\nlink status: FLAPPING\n")
    assert str(caught.value).startswith("unknown link status 'FLAPPING'")
    assert (caught.value.line_no, caught.value.line) == (2, "link status: FLAPPING")


def test_no_link_line_is_unparsable() -> None:
    with pytest.raises(ParseError, match=r"a 'link status' line not found"):
        hccn_link.parse("speed: 100000\n")


def test_link_samples_and_the_source_adapters() -> None:
    chip = ChipRef(3, 1)
    assert hccn_link.samples(hccn_link.LinkRecord(False, "DOWN"), chip, CTX) == [
        Sample("npu_roce_link_up", (("npu", "3"), ("chip", "1")), 0.0)]
    # Built here, not at import: mutmut switches mutants on after the modules are imported.
    source = hccn_link.hccn_source("hccn_link", "link", hccn_link.parse, hccn_link.samples)
    assert source.argv(ChipRef(3, 1, phy_id=6)) == ["-i", "6", "-link", "-g"]
    assert (source.name, source.tool, source.group, source.scope, source.default_enabled) == (
        "hccn_link", "hccn_tool", "roce", "chip", True)
    records = source.parse("link status: UP\n")
    assert records == [hccn_link.LinkRecord(True, "UP")]
    assert source.samples([*records, *records], chip, CTX) == [
        Sample("npu_roce_link_up", (("npu", "3"), ("chip", "1")), 1.0)] * 2
    with pytest.raises(ValueError, match="hccn_link is a per-chip source"):
        source.samples(records, None, CTX)
    optional = hccn_link.hccn_source("x", "y", hccn_link.parse, hccn_link.samples, default_enabled=False)
    assert optional.default_enabled is False


def test_hccn_source_passes_text_records_chip_and_context_through() -> None:
    calls: list[tuple[object, object, object]] = []

    def samples_one(record: str, chip: ChipRef, ctx: CollectContext) -> list[Sample]:
        calls.append((record, chip, ctx))
        return [Sample("npu_roce_link_up", (("npu", record),), 1.0)]

    source = hccn_link.hccn_source("custom", "stat", str.upper, samples_one)
    chip, ctx = ChipRef(1, 0), CollectContext(per_process_metrics=True)
    assert source.parse("ab") == ["AB"]
    assert [s.labels for s in source.samples(["a", "b"], chip, ctx)] == [(("npu", "a"),), (("npu", "b"),)]
    assert calls == [("a", chip, ctx), ("b", chip, ctx)]
    assert source.samples([], chip, ctx) == []
    assert (source.name, source.tool, source.group, source.scope, source.default_enabled) == (
        "custom", "hccn_tool", "roce", "chip", True)
    with pytest.raises(ValueError, match=r"^custom is a per-chip source$"):
        source.samples(["a"], None, ctx)


# --------------------------------------------------------------------------- -link_stat


@pytest.mark.parametrize(("text", "message", "line_no", "line"), [
    ("link up count : 1\n    Tue Foo  1 14:43:40 2022    LINK UP\n",
     "bad link change timestamp: unknown month 'Foo'", 2, "Tue Foo  1 14:43:40 2022    LINK UP"),
    ("link up count : two\n", "link count is not a number", 1, "link up count : two"),
    ("x : 1\nlink down count : -1\n", "link count is not a number", 2, "link down count : -1"),
    ("link up count : 18446744073709551616\n", "link count beyond a 64-bit counter", 1,
     "link up count : 18446744073709551616"),
    ("link up count : 000000000000000000001\n", "link count beyond a 64-bit counter", 1,
     "link up count : 000000000000000000001"),
    ("link up count : 1\n| Port | LINK_UP |\n", "link change row without a timestamp", 2, "| Port | LINK_UP |"),
    ("link up count : 1\n| Tue Foo 1 14:43:40 2022 | LINK_DOWN |\n",
     "bad link change timestamp: unknown month 'Foo'", 2, "| Tue Foo 1 14:43:40 2022 | LINK_DOWN |"),
    ("current time : yesterday\nlink up count : 1\n", "bad current time: not a ctime timestamp: 'yesterday'", 1,
     "current time : yesterday"),
    ("[devid 0] garbage\nnothing here\n", "a 'link up count' line not found in hccn_tool output", 1, "garbage"),
])
def test_link_stat_errors_name_the_line(text: str, message: str, line_no: int, line: str) -> None:
    with pytest.raises(ParseError) as caught:
        hccn_link_stat.parse(text)
    assert str(caught.value).startswith(message)
    assert (caught.value.line_no, caught.value.line) == (line_no, line)


def test_link_stat_counts_up_to_twenty_digits_and_skips_unknown_lines() -> None:
    record = hccn_link_stat.parse("+-------+\nsome banner\nlink up count : 00000000000000000001\n"
                                  "| time | state |\n+===+\n| Tue Aug  1 14:43:40 2022 | LINK_UP |\n")
    assert record.link_up_count == 1
    assert record.link_down_count is None
    assert record.current_time is None
    assert record.changes == (hccn_link_stat.LinkChange(datetime(2022, 8, 1, 14, 43, 40), hccn_link_stat.LINK_UP),)


def test_changes_within_falls_back_to_the_newest_change_then_to_nothing() -> None:
    old = hccn_link_stat.LinkChange(datetime(2022, 8, 1, 14, 0, 0), hccn_link_stat.LINK_DOWN)
    new = hccn_link_stat.LinkChange(datetime(2022, 8, 1, 14, 10, 0), hccn_link_stat.LINK_UP)
    record = hccn_link_stat.LinkStatRecord(2, None, None, (old, new))
    assert hccn_link_stat.changes_within(record, 600) == [old, new]
    assert hccn_link_stat.changes_within(record, 599) == [new]
    empty = hccn_link_stat.LinkStatRecord(0, None, None, ())
    assert hccn_link_stat.changes_within(empty, 600) == []


def test_a_timestamp_mktime_cannot_take_drops_only_that_series(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TZ", "CST-8")  # year 1 local time is year 0 in UTC: out of range
    time.tzset()
    try:
        record = hccn_link_stat.parse("link up count : 3\n    Mon Jan  1 00:00:00 0001    LINK UP\n")
        out = hccn_link_stat.samples(record, ChipRef(0, 0), CTX)
    finally:
        monkeypatch.undo()
        time.tzset()
    assert [(s.metric, s.value) for s in out] == [("npu_roce_link_up_transitions_total", 3.0)]


# --------------------------------------------------------------------------- -net_health


@pytest.mark.parametrize(("text", "message", "line_no", "line"), [
    ("banner\nnet health status :   \n", "empty net health status", 2, "net health status :"),
    ("banner\nnet health status : " + "x" * 33 + "\n",
     "net health status is not printable ASCII of at most 32 characters", 2, "net health status : " + "x" * 33),
    ("banner\nstatus unknown\n", "a 'net health status' line not found in hccn_tool output", 1, "banner"),
])
def test_net_health_errors_name_the_line(text: str, message: str, line_no: int, line: str) -> None:
    with pytest.raises(ParseError) as caught:
        hccn_net_health.parse(text)
    assert str(caught.value).startswith(message)
    assert (caught.value.line_no, caught.value.line) == (line_no, line)


def test_net_health_state_of_32_characters_after_other_lines() -> None:
    state = "y" * 32
    assert hccn_net_health.parse(f"banner\nnet health status : {state}\n").state == state


# --------------------------------------------------------------------------- -optical

OPTICAL = """optical info:
present              : not present
temperature          : 47 C
vendor name          : Hisense
Vcc                  : 3262.90 mV
Tx Power             : 0.5 W
Tx Power1            : 4.4035 mW
Rx Power0            : -10 dBm
Rx Power2            : 1,000 uW
Rx Power3            : not supported
TxPower High Thres   : 3.5481 mW
Temp Low Threshold   : -5 C
Vcc High Thres       : 3600 mV
Bias Low Thres       : 2 mA
Tx Bias0             : 7.9360 mA
Tx Bias1             : 20 uA
Tx Bias2             : 0.5 A
Tx Bias3             : 7 V
Rx Los Flag          : 0xff
Tx LoL Flag          : 0
Tx Los Flag          : junk
Media SNR Lane0      : 23.1211 dB
Host SNR Lane 7      : -3 dB
Host SNR Lane1       : 5 mW
Xsfp Identifier      : QSFP28
Some Vendor Thing    : 42
"""


def test_optical_golden_record() -> None:
    record = hccn_optical.parse(OPTICAL)
    assert record.present == "not present"
    assert record.temperature_celsius == 47.0
    assert record.vcc_volts == pytest.approx(3.2629)
    assert record.tx_power_watts == pytest.approx({"0": 0.5, "1": 4.4035e-3})
    assert record.rx_power_watts == pytest.approx({"0": 1e-4, "2": 1e-3})
    assert record.thresholds == pytest.approx({"txpower_high_watts": 3.5481e-3, "temp_low_celsius": -5.0,
                                               "vcc_high_volts": 3.6, "bias_low_amps": 2e-3})
    assert record.tx_bias_amps == pytest.approx({"0": 7.936e-3, "1": 2e-5, "2": 0.5})
    assert record.flags == {"rx_los_flag": 255, "tx_lol_flag": 0}
    assert record.snr_db == pytest.approx({"media0": 23.1211, "host7": -3.0})
    assert record.vendor == {"vendor_name": "Hisense", "xsfp_identifier": "QSFP28"}
    assert record.other == {"some vendor thing": "42"}
    assert record.rejected == ()
    assert record.signal_lost is True


def test_optical_flags_all_clear_and_none_printed() -> None:
    assert hccn_optical.parse("Rx Los Flag : 0x0\nTx Los Flag : 00\n").signal_lost is False
    assert hccn_optical.parse("temperature : 40 C\n").signal_lost is None


@pytest.mark.parametrize(("value", "watts"), [
    ("4.4035 mW", 4.4035e-3), ("0 dBm", 1e-3), ("10 dBm", 1e-2), ("-30dBm", 1e-6), ("2 uW", 2e-6),
    ("1.25 W", 1.25), (".5 mw", 5e-4), ("+1 W", 1.0), ("5", None), ("5 mA", None), ("NA", None),
    ("1e999 dBm", None), ("99999 dBm", None),
])
def test_power_watts_units(value: str, watts: float | None) -> None:
    result = hccn_optical.power_watts(value)
    if watts is None:
        assert result is None
    else:
        assert result == pytest.approx(watts, rel=1e-12)


@pytest.mark.parametrize(("line", "reason"), [
    ("temperature : 151 C", "temperature 151 outside -40..150 C"),
    ("Vcc : 11 V", "Vcc 11 outside 0..10 V"),
    ("Tx Bias0 : 2 A", "tx bias0 2 outside 0..1 A"),
    ("Media SNR Lane0 : 101 dB", "media snr lane0 101 outside -100..100 dB"),
    ("Rx Power1 : 2 W", "rx power 2 outside 0..1 W"),
    ("Tx Power16 : 1 mW", "lane 16 beyond 16 lanes"),
    ("Tx Bias100 : 1 mA", "lane 100 beyond 16 lanes"),
    ("Host SNR Lane16 : 1 dB", "lane 16 beyond 16 lanes"),
])
def test_optical_rejections_name_the_reading_and_line(line: str, reason: str) -> None:
    record = hccn_optical.parse(f"optical info:\n{line}\n")
    assert [(r.line_no, r.line, r.reason) for r in record.rejected] == [(2, line, reason)]
    assert record.tx_power_watts == record.rx_power_watts == record.tx_bias_amps == record.snr_db == {}


def test_optical_lane_fifteen_is_the_last_lane() -> None:
    record = hccn_optical.parse("Tx Power15 : 1 mW\nTx Bias15 : 1 mA\nHost SNR Lane15 : 1 dB\n")
    assert (record.tx_power_watts, record.tx_bias_amps, record.snr_db) == ({"15": 1e-3}, {"15": 1e-3},
                                                                           {"host15": 1.0})


def test_optical_wrong_units_are_ignored_not_rejected() -> None:
    record = hccn_optical.parse("optical info:\ntemperature : 47 V\nVcc : 3 C\nTx Bias0 : 1 dB\n"
                                "Media SNR Lane0 : 1 C\nTx Power0 : 1 C\nX High Thres : 1 zz\n")
    assert (record.temperature_celsius, record.vcc_volts) == (None, None)
    assert record.tx_bias_amps == record.snr_db == record.tx_power_watts == record.thresholds == {}
    assert record.rejected == ()


def test_optical_error_text_alone_is_not_a_reading() -> None:
    with pytest.raises(ToolError):
        hccn_optical.parse("Error: invalid device id\n")
    with pytest.raises(ParseError, match=r"^optical module readings not found"):
        hccn_optical.parse("no colon here\n")
    assert hccn_optical.parse("optical info:\n").other == {}


def test_optical_samples() -> None:
    record = hccn_optical.parse(OPTICAL)
    got = [(s.metric, s.labels, s.value) for s in hccn_optical.samples(record, ChipRef(2, 1), CTX)]
    port = (("npu", "2"), ("chip", "1"))
    assert got == [
        ("npu_optical_temperature_celsius", port, 47.0),
        ("npu_optical_tx_power_watts", (*port, ("lane", "0")), 0.5),
        ("npu_optical_tx_power_watts", (*port, ("lane", "1")), pytest.approx(4.4035e-3)),
        ("npu_optical_rx_power_watts", (*port, ("lane", "0")), pytest.approx(1e-4)),
        ("npu_optical_rx_power_watts", (*port, ("lane", "2")), pytest.approx(1e-3)),
        ("npu_optical_signal_lost", port, 1.0),
    ]
    quiet = hccn_optical.parse("Rx Los Flag : 0\n")
    assert [(s.metric, s.value) for s in hccn_optical.samples(quiet, ChipRef(2, 1), CTX)] == [
        ("npu_optical_signal_lost", 0.0)]


# --------------------------------------------------------------------------- -stat


@pytest.mark.parametrize("word", ["err", "drop", "rty", "retry", "timeout", "unexpected", "bad", "discard"])
def test_each_error_word_makes_an_error_counter(word: str) -> None:
    assert hccn_stat.is_error_counter(f"roce_{word.upper()}_num")
    assert not hccn_stat.is_error_counter("roce_rx_all_pkt_num")


def test_stat_rejections_and_the_counter_cap() -> None:
    limit = LIMITS["counters"]
    lines = [f"c{n}_err:{n}" for n in range(limit)]
    text = "\n".join(["packet statistics:", *lines, "c0_err:7", "extra_err:1", "neg_err:-1", "frac_err:1.5",
                      "big_err:18446744073709551616", "max_err:18446744073709551615"]) + "\n"
    record = hccn_stat.parse(text)
    assert len(record.counters) == limit
    assert record.counters["c0_err"] == 7  # an already known counter is updated at the cap
    base = limit + 3
    assert [(r.line_no, r.reason) for r in record.rejected] == [
        (base, f"more than {limit} counters"),
        (base + 1, "counter neg_err: '-1' is not a non-negative 64-bit integer"),
        (base + 2, "counter frac_err: '1.5' is not a non-negative 64-bit integer"),
        (base + 3, "counter big_err: '18446744073709551616' is not a non-negative 64-bit integer"),
        (base + 4, f"more than {limit} counters"),
    ]
    assert record.rejected[0].line == "extra_err:1"
    assert record.rejected[1].line == "neg_err:-1"


def test_stat_samples_only_error_counters_sorted() -> None:
    record = hccn_stat.parse("packet statistics:\nz_drop_num: 2\nrx_pkt:9\na_err:1\n")
    assert record.counters == {"z_drop_num": 2, "rx_pkt": 9, "a_err": 1}
    got = [(s.metric, s.labels, s.value) for s in hccn_stat.samples(record, ChipRef(4, 0), CTX)]
    port = (("npu", "4"), ("chip", "0"))
    assert got == [("npu_roce_errors_total", (*port, ("counter", "a_err")), 1.0),
                   ("npu_roce_errors_total", (*port, ("counter", "z_drop_num")), 2.0)]


def test_stat_without_counters_is_unparsable() -> None:
    with pytest.raises(ParseError, match=r"^packet counters not found"):
        hccn_stat.parse("packet statistics:\n")


def test_optical_flags_thresholds_in_dbm_and_odd_lines() -> None:
    record = hccn_optical.parse("optical info:\n--------\nTx Lol Flag : 10\nRxPower Low Thres : -10 dBm\n"
                                "TxPower High Thres : 99999 dBm\nTx Power001 : 1 mW\nRx Power1 : 2 mW\n"
                                "Bad\x1b : 1\nRx Power2 : 3 mW\n")
    assert record.flags == {"tx_lol_flag": 10}
    assert record.thresholds == pytest.approx({"rxpower_low_watts": 1e-4})
    assert record.rx_power_watts == pytest.approx({"1": 2e-3, "2": 3e-3})
    assert record.tx_power_watts == {}
    assert [(r.line_no, r.reason) for r in record.rejected] == [
        (8, "line too long or with control characters"), (6, "lane 001 beyond 16 lanes")]


def test_optical_threshold_names_join_their_words() -> None:
    record = hccn_optical.parse("Rx Power Low Thres : 1 mW\n")
    assert record.thresholds == pytest.approx({"rx_power_low_watts": 1e-3})
