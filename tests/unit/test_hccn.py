"""hccn_tool parsers and sources (synthetic fixtures under tests/fixtures/hccn/)."""

from __future__ import annotations

import time
from datetime import datetime

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from collectors import (
    hccn_ip,
    hccn_link,
    hccn_link_stat,
    hccn_net_health,
    hccn_optical,
    hccn_speed,
    hccn_stat,
)
from collectors.base import ChipRef, CollectContext, ParseError, Sample, ToolError
from collectors.bounds import LIMITS, Rejects
from collectors.catalogue import CATALOGUE
from tests.support import paths
from tests.support.invariants import assert_rejections_come_from, assert_values_within_bounds

FIXTURES = paths.FIXTURES / "hccn"
CTX = CollectContext()
CHIP = ChipRef(npu=5, chip=0, logic_id=2, phy_id=6)

SOURCE_MODULES = (hccn_link, hccn_link_stat, hccn_net_health, hccn_optical, hccn_stat, hccn_speed)
PARSERS = (*(module.parse for module in SOURCE_MODULES), hccn_ip.parse)


def fixture(name: str) -> str:
    return (FIXTURES / name).read_text()


def as_dict(samples: list[Sample]) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    return {(s.metric, s.labels): s.value for s in samples}


def assert_catalogued(samples: list[Sample]) -> None:
    for sample in samples:
        spec = CATALOGUE[sample.metric]
        assert tuple(name for name, _ in sample.labels) == spec.labels, sample


# --- shared helpers ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("chip", "expected"),
    [
        (ChipRef(npu=5, chip=0, logic_id=2, phy_id=6), 6),
        (ChipRef(npu=5, chip=0, logic_id=2), 2),
        (ChipRef(npu=5, chip=0), 5),
        (ChipRef(npu=5, chip=0, phy_id=0), 0),  # 0 is a valid physical id, not "unknown"
    ],
)
def test_device_id_prefers_phy_then_logic_then_npu(chip: ChipRef, expected: int) -> None:
    assert hccn_link.device_id(chip) == expected


@pytest.mark.parametrize("module", SOURCE_MODULES)
def test_sources_are_per_chip_roce_hccn_tool(module: object) -> None:
    source = module.SOURCE  # type: ignore[attr-defined]
    assert source.tool == "hccn_tool"
    assert source.group == "roce"
    assert source.scope == "chip"
    assert source.name.startswith("hccn_")
    command = source.name.removeprefix("hccn_")
    assert source.argv(CHIP) == ["-i", "6", f"-{command}", "-g"]
    with pytest.raises(ValueError, match="per-chip"):
        source.argv(None)


def test_source_wraps_one_record_and_labels_with_npu_not_device_id() -> None:
    records = hccn_link.SOURCE.parse(fixture("link_down.txt"))
    assert len(records) == 1
    out = hccn_link.SOURCE.samples(records, CHIP, CTX)
    assert as_dict(out) == {("npu_roce_link_up", (("npu", "5"), ("chip", "0"),)): 0.0}


@pytest.mark.parametrize("name", ["error_invalid_device.txt", "error_usage.txt", "error_dev_id.txt"])
@pytest.mark.parametrize("parse", [m.parse for m in SOURCE_MODULES] + [hccn_ip.parse], ids=repr)
def test_tool_error_messages_raise_tool_error(name: str, parse: object) -> None:
    with pytest.raises(ToolError):
        parse(fixture(name))  # type: ignore[operator]


@pytest.mark.parametrize("parse", [m.parse for m in SOURCE_MODULES] + [hccn_ip.parse], ids=repr)
@pytest.mark.parametrize("text", ["", "   \n\n"])
def test_empty_output_is_a_tool_error(parse: object, text: str) -> None:
    with pytest.raises(ToolError, match="printed nothing"):
        parse(text)  # type: ignore[operator]


@pytest.mark.parametrize("parse", [m.parse for m in SOURCE_MODULES] + [hccn_ip.parse], ids=repr)
def test_garbage_is_a_parse_error_with_the_line(parse: object) -> None:
    with pytest.raises(ParseError) as info:
        parse("lorem ipsum\nsit amet")  # type: ignore[operator]
    assert not isinstance(info.value, ToolError)
    assert info.value.line == "lorem ipsum"


@settings(max_examples=150, deadline=None)
@given(st.text(max_size=300))
def test_any_text_parses_or_raises_parse_error(text: str) -> None:
    for parse in PARSERS:
        try:
            records = parse(text)
        except ParseError:
            continue
        assert_values_within_bounds(records)
        assert_rejections_come_from(records, text)


@settings(max_examples=100, deadline=None)
@given(st.lists(st.sampled_from([
    "link status: UP", "[devid 1]link up count : 3", "[devid 1]    Tue Aug  1 14:43:40 2022    LINK UP",
    "net health status: Init", "Tx Power0 : 1.5 mW", "Rx Los Flag : 0x1", "roce_rx_err_pkt_num:4",
    "Speed: 25G", "ipaddr:1.2.3.4", "| 0 | 0 | 4 | LINK_UP | Mon Feb 9 21:45:51 2026 |", "optical info:",
    "temperature : 40 C", "link status : PARTIAL LINK", "port 4 : UP", "Bandwidth TX: 1.00 MB/sec",
]), max_size=8).map("\n".join))
def test_mixed_known_lines_parse_or_raise_parse_error(text: str) -> None:
    """Known lines in any order: ParseError or records whose values keep their bounds and whose
    rejections are input lines."""
    for parse in PARSERS:
        try:
            records = parse(text)
        except ParseError:
            continue
        assert_values_within_bounds(records)
        assert_rejections_come_from(records, text)


# --- -link -------------------------------------------------------------------------------------------


def test_link_up_and_down() -> None:
    assert hccn_link.parse(fixture("link_up.txt")).up is True
    down = hccn_link.parse(fixture("link_down.txt"))
    assert down.up is False
    assert down.state == "DOWN"
    out = hccn_link.samples(down, CHIP, CTX)
    assert_catalogued(out)
    assert as_dict(out) == {("npu_roce_link_up", (("npu", "5"), ("chip", "0"),)): 0.0}


def test_link_unknown_state_is_a_parse_error() -> None:
    with pytest.raises(ParseError, match="unknown link status") as info:
        hccn_link.parse("link status: PARTIAL LINK\n")
    assert info.value.line_no == 1


def test_link_accepts_devid_prefix_and_blank_lines() -> None:
    assert hccn_link.parse("\n[devid 3] link status: UP  \n").up is True


# --- -link_stat --------------------------------------------------------------------------------------


def test_link_stat_flapping_count_rises_and_records_are_kept() -> None:
    before = hccn_link_stat.parse(fixture("link_stat_flap_before.txt"))
    after = hccn_link_stat.parse(fixture("link_stat_flap_after.txt"))
    assert (before.link_up_count, after.link_up_count) == (1, 4)
    assert after.link_down_count == 3
    assert after.current_time == datetime(2025, 3, 3, 9, 10, 0)
    assert len(after.changes) == 7
    newest_printed = hccn_link_stat.LinkChange(datetime(2025, 3, 3, 9, 7, 42), hccn_link_stat.LINK_UP)
    assert after.changes[0] == newest_printed
    assert after.changes[1].state == hccn_link_stat.LINK_DOWN
    assert after.newest_change is not None
    assert after.newest_change.at == datetime(2025, 3, 3, 9, 7, 42)


def test_link_stat_changes_within_window_counts_flaps_on_the_tools_clock() -> None:
    after = hccn_link_stat.parse(fixture("link_stat_flap_after.txt"))
    recent = hccn_link_stat.changes_within(after, window_s=600)
    assert [c.state for c in recent].count(hccn_link_stat.LINK_DOWN) == 3
    assert len(recent) == 6  # the 23:58 link-up of the night before is outside
    assert hccn_link_stat.changes_within(after, window_s=60) == []
    explicit = hccn_link_stat.changes_within(after, 10, now=datetime(2025, 3, 3, 9, 7, 50))
    assert [c.at.second for c in explicit] == [42, 40]


def test_link_stat_samples_use_local_time_of_newest_record() -> None:
    after = hccn_link_stat.parse(fixture("link_stat_flap_after.txt"))
    out = hccn_link_stat.samples(after, CHIP, CTX)
    assert_catalogued(out)
    values = as_dict(out)
    labels = (("npu", "5"), ("chip", "0"),)
    assert values[("npu_roce_link_up_transitions_total", labels)] == 4.0
    expected = datetime(2025, 3, 3, 9, 7, 42).timestamp()
    assert values[("npu_roce_link_last_change_timestamp_seconds", labels)] == expected


def test_link_stat_950_table_layout() -> None:
    record = hccn_link_stat.parse(fixture("link_stat_table.txt"))
    assert record.link_up_count == 1
    assert record.link_down_count == 1
    assert record.current_time is None
    assert [c.state for c in record.changes] == [hccn_link_stat.LINK_DOWN, hccn_link_stat.LINK_UP]
    assert record.changes[0].at == datetime(2026, 1, 6, 8, 15, 2)


def test_link_stat_without_records_has_no_timestamp_sample() -> None:
    record = hccn_link_stat.parse("[devid 0]link up count       : 0\n[devid 0]link change records :\n")
    assert record.changes == ()
    assert [s.metric for s in hccn_link_stat.samples(record, CHIP, CTX)] == [
        "npu_roce_link_up_transitions_total"]


@pytest.mark.parametrize("text", [
    "[devid 0]link up count : two\n",
    "[devid 0]link up count : 1\n[devid 0]    Tue Foo  1 14:43:40 2022    LINK UP\n",
    "[devid 0]link up count : 1\n[devid 0]    Tue Feb 30 14:43:40 2022    LINK UP\n",
])
def test_link_stat_bad_values_are_parse_errors(text: str) -> None:
    with pytest.raises(ParseError):
        hccn_link_stat.parse(text)


def test_parse_ctime_is_locale_free_and_spacing_tolerant() -> None:
    assert hccn_link_stat.parse_ctime("Tue Aug  1 14:43:40 2022") == datetime(2022, 8, 1, 14, 43, 40)
    assert hccn_link_stat.parse_ctime("Mon Feb 9 21:45:51 2026") == datetime(2026, 2, 9, 21, 45, 51)
    with pytest.raises(ValueError, match="ctime"):
        hccn_link_stat.parse_ctime("2022-08-01 14:43:40")


# --- -net_health -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "healthy", "state"),
    [("net_health_success.txt", 1.0, "success"), ("net_health_socket_failed.txt", 0.0, "socket_failed")],
)
def test_net_health(name: str, healthy: float, state: str) -> None:
    record = hccn_net_health.parse(fixture(name))
    out = hccn_net_health.samples(record, CHIP, CTX)
    assert_catalogued(out)
    assert as_dict(out) == {
        ("npu_roce_net_healthy", (("npu", "5"), ("chip", "0"),)): healthy,
        ("npu_roce_net_health_state", (("npu", "5"), ("chip", "0"), ("state", state))): 1.0,
    }


def test_net_health_init_is_unhealthy_and_empty_state_is_an_error() -> None:
    assert hccn_net_health.parse("net health status: Init").healthy is False
    assert hccn_net_health.state_label("Detect  Fault ") == "detect_fault"
    with pytest.raises(ParseError, match="empty"):
        hccn_net_health.parse("net health status:   \n")


# --- -optical ----------------------------------------------------------------------------------------


def test_optical_no_light_sets_signal_lost_and_zero_rx() -> None:
    record = hccn_optical.parse(fixture("optical_no_light.txt"))
    assert record.temperature_celsius == 52.0
    assert record.vcc_volts == pytest.approx(3.3012)
    assert record.rx_power_watts == {"0": 0.0, "1": 0.0, "2": 0.0, "3": 0.0}
    assert record.tx_power_watts["1"] == pytest.approx(0.8875e-3)
    assert record.signal_lost is True
    assert record.flags["rx_los_flag"] == 0xF
    assert record.thresholds["temp_low_celsius"] == -5.0
    assert record.thresholds["rxpower_low_watts"] == pytest.approx(0.0468e-3)
    assert record.tx_bias_amps == {"0": pytest.approx(6.5e-3)}
    assert record.vendor["vendor_part_number"] == "XQ-100G-SR4"
    assert record.snr_db == {}  # "not supported"
    out = hccn_optical.samples(record, CHIP, CTX)
    assert_catalogued(out)
    values = as_dict(out)
    assert values[("npu_optical_signal_lost", (("npu", "5"), ("chip", "0"),))] == 1.0
    assert values[("npu_optical_rx_power_watts", (("npu", "5"), ("chip", "0"), ("lane", "2")))] == 0.0
    assert values[("npu_optical_temperature_celsius", (("npu", "5"), ("chip", "0"),))] == 52.0
    assert len(out) == 1 + 4 + 4 + 1


def test_optical_dbm_is_converted_and_clear_flags_mean_no_loss() -> None:
    record = hccn_optical.parse(fixture("optical_healthy_dbm.txt"))
    assert record.tx_power_watts["0"] == pytest.approx(10 ** (-0.1) / 1000)
    assert record.tx_power_watts["1"] == pytest.approx(1e-3)
    assert record.rx_power_watts == {"0": pytest.approx(10 ** (-0.3) / 1000)}  # lane 1 is NA
    assert record.signal_lost is False
    values = as_dict(hccn_optical.samples(record, CHIP, CTX))
    assert values[("npu_optical_signal_lost", (("npu", "5"), ("chip", "0"),))] == 0.0
    assert values[("npu_optical_temperature_celsius", (("npu", "5"), ("chip", "0"),))] == 38.5


def test_optical_without_flags_exports_no_signal_lost() -> None:
    record = hccn_optical.parse("optical info:\ntemperature : 40 C\n")
    assert record.signal_lost is None
    assert [s.metric for s in hccn_optical.samples(record, CHIP, CTX)] == ["npu_optical_temperature_celsius"]


@pytest.mark.parametrize(("text", "watts"), [
    ("4.4035 mW", 4.4035e-3), ("0.5 W", 0.5), ("250 uW", 250e-6), ("-40 dBm", 1e-7),
    ("not supported", None), ("NA", None), ("3 V", None), ("1e999 dBm", None),
])
def test_power_watts(text: str, watts: float | None) -> None:
    result = hccn_optical.power_watts(text)
    if watts is None:
        assert result is None
    else:
        assert result == pytest.approx(watts)


# --- -stat -------------------------------------------------------------------------------------------


def test_stat_keeps_all_counters_and_exports_error_like_ones_by_name() -> None:
    record = hccn_stat.parse(fixture("stat_counters.txt"))
    assert len(record.counters) == 23
    assert record.counters["mac_tx_total_pkt_num"] == 918273
    out = hccn_stat.samples(record, CHIP, CTX)
    assert_catalogued(out)
    exported = {dict(s.labels)["counter"]: s.value for s in out if s.metric == "npu_roce_errors_total"}
    assert exported == {
        "mac_tx_bad_pkt_num": 0.0, "mac_rx_bad_pkt_num": 2.0, "mac_rx_fcs_err_pkt_num": 5.0,
        "roce_rx_err_pkt_num": 7.0, "roce_tx_err_pkt_num": 0.0, "roce_unexpected_ack_num": 1.0,
        "roce_verification_err_num": 0.0, "roce_qp_status_err_num": 0.0, "roce_new_pkt_rty_num": 9.0,
    }


def test_stat_exports_port_bytes_and_pfc_frames_of_the_full_910b_listing() -> None:
    record = hccn_stat.parse(fixture("stat_910b_listing.txt"))
    assert len(record.counters) == 46 and not record.rejected
    out = hccn_stat.samples(record, ChipRef(3, 0), CTX)
    assert_catalogued(out)
    port = (("npu", "3"), ("chip", "0"))
    traffic = {(s.metric, s.labels): s.value for s in out if s.metric != "npu_roce_errors_total"}
    assert traffic == {
        ("npu_roce_transmitted_bytes_total", port): 11438087966212.0,
        ("npu_roce_pfc_pause_frames_total", (*port, ("direction", "rx"))): 20417.0,
        ("npu_roce_pfc_pause_frames_total", (*port, ("direction", "tx"))): 1532.0,
    }
    # received bytes, packet counts, CNPs and 802.3x pause frames stay in the record only
    errors = [dict(s.labels)["counter"] for s in out if s.metric == "npu_roce_errors_total"]
    assert "mac_rx_mac_pause_num" not in errors and "nic_tx_all_oct_num" not in errors
    assert len(out) == len(errors) + 3


def test_stat_sums_pfc_priorities_where_a_port_prints_no_total() -> None:
    text = ("packet statistics:\nmac_tx_pfc_pri0_pkt_num:1\nmac_tx_pfc_pri3_pkt_num:40\n"
            "mac_rx_pfc_pri3_pkt_num:7\nmac_rx_pfc_pri7_pkt_num:2\nmac_rx_pfc_pri8_pkt_num:100\n")
    assert hccn_stat.pfc_pause_frames(hccn_stat.parse(text)) == {"tx": 41, "rx": 9}
    # a printed total wins over its priorities (they are its parts, not more frames)
    both = hccn_stat.parse("mac_tx_pfc_pkt_num:50\nmac_tx_pfc_pri3_pkt_num:40\n")
    assert hccn_stat.pfc_pause_frames(both) == {"tx": 50}
    # the 950 port statistics struct's names
    assert hccn_stat.pfc_pause_frames(hccn_stat.parse("core_mib_rxpfcpkts:5\ncore_mib_txpfcpkts:6\n")) == {
        "rx": 5, "tx": 6}


def test_stat_without_traffic_counters_exports_no_traffic_series() -> None:
    # The 950 UB port's shape and the 910A error-only listing print no octets and no PFC: no series, never
    # a 0 (the real captures: tests/conformance/test_hccn_dmi.py).
    ub = "packet statistics:\nport_id: 4\nrx_busi_flit_num: 10\ntx_busi_flit_num: 12\ncrc_error_sum: 0\n"
    for text in (ub, "packet statistics:\nroce_rx_err_pkt_num:0\nroce_tx_err_pkt_num:0\n"):
        out = hccn_stat.samples(hccn_stat.parse(text), CHIP, CTX)
        assert out and {s.metric for s in out} == {"npu_roce_errors_total"}


def test_stat_accepts_space_after_colon_and_devid_prefix() -> None:
    record = hccn_stat.parse("packet statistics:\n[devid 2] drop_ind_cnt_rx: 4\nretry_req_sum: 1\n")
    assert record.counters == {"drop_ind_cnt_rx": 4, "retry_req_sum": 1}
    assert hccn_stat.is_error_counter("tx_timeout_num")
    assert not hccn_stat.is_error_counter("roce_rx_all_pkt_num")


def test_stat_header_only_is_a_parse_error() -> None:
    with pytest.raises(ParseError):
        hccn_stat.parse("packet statistics:\n")


def test_stat_junk_with_a_stray_counter_like_line_is_a_parse_error() -> None:
    # The demo's random garbage once held "Qz:7" among its lines, and the port read as healthy.
    junk = "x9|(]] aQ 3\nQz:7\n  +-= P0 ..%%\n"
    with pytest.raises(ParseError):
        hccn_stat.parse(junk)
    assert hccn_stat.parse("packet statistics:\nroce_rx_err_pkt_num:0\n").counters == {"roce_rx_err_pkt_num": 0}


# --- -speed ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("text", "bytes_per_second"), [
    ("Speed: 100000 Mb/s", 100e9 / 8), ("speed: 200000 Mb/s", 200e9 / 8), ("Speed: 100G", 100e9 / 8),
    ("Speed: 25 Gb/s", 25e9 / 8), ("speed:400Gbps", 400e9 / 8),
])
def test_speed_units_are_bits_converted_to_bytes(text: str, bytes_per_second: float) -> None:
    record = hccn_speed.parse(text)
    assert record.bytes_per_second == pytest.approx(bytes_per_second)
    out = hccn_speed.samples(record, CHIP, CTX)
    assert_catalogued(out)
    assert out[0].value == pytest.approx(bytes_per_second)


def test_speed_fixture_and_unknown_link() -> None:
    assert hccn_speed.parse(fixture("speed_100000mbps.txt")).bytes_per_second == 12.5e9
    unknown = hccn_speed.parse(fixture("speed_unknown.txt"))
    assert unknown.bytes_per_second is None
    assert hccn_speed.samples(unknown, CHIP, CTX) == []


@pytest.mark.parametrize("text", ["Speed: fast", "Speed: 100", "Speed: 100 Kb/s", "Speed: "])
def test_speed_unknown_shapes_are_parse_errors(text: str) -> None:
    with pytest.raises(ParseError, match="unrecognised speed"):
        hccn_speed.parse(text)


# --- -ip and /etc/hccn.conf --------------------------------------------------------------------------


def test_ip_and_hccn_conf_comparison() -> None:
    live = hccn_ip.parse(fixture("ip.txt"))
    assert live == hccn_ip.IpRecord(address="10.20.0.14", netmask="255.255.255.0")
    conf = hccn_ip.parse_hccn_conf(fixture("hccn.conf"))
    assert sorted(conf) == [0, 3]
    assert conf[0].address == "10.20.0.11"
    assert conf[0].netdetect == "10.20.0.1"
    assert conf[0].other == {"send_arp_status": "1"}
    assert conf[3].other == {"tls_enable": "0"}
    problems = hccn_ip.mismatches(live, conf[0])
    assert len(problems) == 1
    assert "10.20.0.14" in problems[0]
    assert "10.20.0.11" in problems[0]
    assert len(hccn_ip.mismatches(live, conf[3])) == 2
    same = hccn_ip.IpRecord(address="10.20.0.11", netmask="255.255.255.0")
    assert hccn_ip.mismatches(same, conf[0]) == []
    assert hccn_ip.argv(CHIP) == ["-i", "6", "-ip", "-g"]


def test_ip_bad_address_and_conf_without_equals() -> None:
    with pytest.raises(ParseError, match="not an IP"):
        hccn_ip.parse("ipaddr:300.1.1.1\n")
    with pytest.raises(ParseError) as info:
        hccn_ip.parse_hccn_conf("address_0=1.2.3.4\nbogus line\n")
    assert info.value.line_no == 2


def test_speed_overflow_is_a_parse_error() -> None:
    with pytest.raises(ParseError, match="out of range"):
        hccn_speed.parse("Speed: " + "9" * 400 + " Gb/s")


def test_device_id_zero_ids_are_ids_not_missing() -> None:
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
