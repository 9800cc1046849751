"""hccn_tool parsers and sources (synthetic fixtures under tests/fixtures/hccn/)."""

from __future__ import annotations

import contextlib
from datetime import datetime
from pathlib import Path

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
from collectors.catalogue import CATALOGUE

FIXTURES = Path(__file__).parent / "fixtures" / "hccn"
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
        with contextlib.suppress(ParseError):
            parse(text)


@settings(max_examples=100, deadline=None)
@given(st.lists(st.sampled_from([
    "link status: UP", "[devid 1]link up count : 3", "[devid 1]    Tue Aug  1 14:43:40 2022    LINK UP",
    "net health status: Init", "Tx Power0 : 1.5 mW", "Rx Los Flag : 0x1", "roce_rx_err_pkt_num:4",
    "Speed: 25G", "ipaddr:1.2.3.4", "| 0 | 0 | 4 | LINK_UP | Mon Feb 9 21:45:51 2026 |", "optical info:",
    "temperature : 40 C", "link status : PARTIAL LINK", "port 4 : UP", "Bandwidth TX: 1.00 MB/sec",
]), max_size=8).map("\n".join))
def test_mixed_known_lines_parse_or_raise_parse_error(text: str) -> None:
    for parse in PARSERS:
        with contextlib.suppress(ParseError):
            parse(text)


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


def test_stat_keeps_all_counters_and_exports_only_error_like_ones() -> None:
    record = hccn_stat.parse(fixture("stat_counters.txt"))
    assert len(record.counters) == 23
    assert record.counters["mac_tx_total_pkt_num"] == 918273
    out = hccn_stat.samples(record, CHIP, CTX)
    assert_catalogued(out)
    exported = {dict(s.labels)["counter"]: s.value for s in out}
    assert exported == {
        "mac_tx_bad_pkt_num": 0.0, "mac_rx_bad_pkt_num": 2.0, "mac_rx_fcs_err_pkt_num": 5.0,
        "roce_rx_err_pkt_num": 7.0, "roce_tx_err_pkt_num": 0.0, "roce_unexpected_ack_num": 1.0,
        "roce_verification_err_num": 0.0, "roce_qp_status_err_num": 0.0, "roce_new_pkt_rty_num": 9.0,
    }


def test_stat_accepts_space_after_colon_and_devid_prefix() -> None:
    record = hccn_stat.parse("packet statistics:\n[devid 2] drop_ind_cnt_rx: 4\nretry_req_sum: 1\n")
    assert record.counters == {"drop_ind_cnt_rx": 4, "retry_req_sum": 1}
    assert hccn_stat.is_error_counter("tx_timeout_num")
    assert not hccn_stat.is_error_counter("roce_rx_all_pkt_num")


def test_stat_header_only_is_a_parse_error() -> None:
    with pytest.raises(ParseError):
        hccn_stat.parse("packet statistics:\n")


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
