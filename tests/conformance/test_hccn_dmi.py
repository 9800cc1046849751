"""hccn_tool and ascend-dmi parsers over the shared corpus of real captures.

Every ``tools/hccn_tool_*`` and ``tools/ascend-dmi_*`` file must either parse
with the parser chosen by its command, or be listed in ``UNSUPPORTED`` with the
reason. A new corpus file that is neither fails the inventory test.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from collectors import (
    ascend_dmi,
    ascend_dmi_diag,
    hccn_ip,
    hccn_link,
    hccn_link_stat,
    hccn_net_health,
    hccn_optical,
    hccn_stat,
)
from collectors.base import ChipRef, CollectContext
from collectors.bounds import rejections
from tests.support.paths import CORPUS

TOOLS = CORPUS / "tools"
LOGS = CORPUS / "logs"
if not TOOLS.is_dir():
    pytest.skip(f"corpus not found at {CORPUS}", allow_module_level=True)

CHIP = ChipRef(npu=0, chip=0, phy_id=0)
CTX = CollectContext()

# Command part of the file name (before the first "__") -> parser.
PARSERS: dict[str, Callable[[str], Any]] = {
    "hccn_tool_-link_-g": hccn_link.parse,
    "hccn_tool_-link_stat_-g": hccn_link_stat.parse,
    "hccn_tool_-net_health_-g": hccn_net_health.parse,
    "hccn_tool_-optical_-g": hccn_optical.parse,
    "hccn_tool_-stat_-g": hccn_stat.parse,
    "hccn_tool_-ip_-g": hccn_ip.parse,
    "hccn_tool_-g_-link_-u_-p": hccn_link.parse,  # 950: same 'link status:' line
    "hccn_tool_-g_-link_stat": hccn_link_stat.parse,  # 950: box table
    "hccn_tool_-g_-stat_-u_-p": hccn_stat.parse,  # 950: 'name: value'
    "ascend-dmi_-f_-t_fp16": ascend_dmi.parse_flops,
    "ascend-dmi_-f_-t_int8": ascend_dmi.parse_flops,
    "ascend-dmi_-dg_-i_driver": ascend_dmi_diag.parse,
    "ascend-dmi_-dg_-i_cann_-p": ascend_dmi_diag.parse,
    "ascend-dmi_-dg_-i_device": ascend_dmi_diag.parse,
    "ascend-dmi_-dg_-i_network": ascend_dmi_diag.parse,
    "ascend-dmi_--dg_-i_bandwidth": ascend_dmi_diag.parse,
    "ascend-dmi_--dg_--scene_healthCheck,performanceCheck,stressTest_-q": ascend_dmi_diag.parse,
    "ascend-dmi_--dg_-i_aicore_-s_-q": ascend_dmi_diag.parse,
}

UNSUPPORTED: dict[str, str] = {
    "hccn_tool_-fec_-g": "FEC mode is configuration, no metric in the catalogue",
    "hccn_tool_-hw_stats_-g": "RDMA resource counters (pd/mr/cq/qp alloc), no metric in the catalogue",
    "hccn_tool_-ping_-g": "an active RoCE ping, run by diagnose on demand rather than parsed as a source",
    "hccn_tool_-route_-g": "routing table, no metric in the catalogue",
    "hccn_tool_-tls_-g_grep-switch": "grep-filtered TLS settings line, no metric in the catalogue",
    "hccn_tool_-g_-vnic": "950 virtual NIC address, no metric in the catalogue",
    "hccn_tool_-g_-ub_connect": "950 UB port link states, no Source (needs a per-port scope the agent lacks)",
    "hccn_tool_-g_-dev_info": "950 UB port table, no Source (needs a per-port scope the agent lacks)",
    "hccn_tool_-g_-bandwidth": "950 UB port bandwidth, no Source (needs a per-port scope the agent lacks)",
}


def command_of(path: Path) -> str:
    return path.name.split("__", 1)[0]


def corpus_files() -> list[Path]:
    return sorted([*TOOLS.glob("hccn_tool_*"), *TOOLS.glob("ascend-dmi_*")])


def one(prefix: str) -> str:
    matches = [path for path in corpus_files() if command_of(path) == prefix]
    assert len(matches) >= 1, prefix
    return matches[0].read_text()


def named(fragment: str) -> str:
    (path,) = [path for path in corpus_files() if fragment in path.name]
    return path.read_text()


def test_every_corpus_file_is_parsed_or_listed_as_unsupported() -> None:
    files = corpus_files()
    assert len(files) >= 20
    unknown = [path.name for path in files if command_of(path) not in PARSERS | UNSUPPORTED]
    assert unknown == []


SUPPORTED_FILES = [path for path in corpus_files() if command_of(path) in PARSERS]


@pytest.mark.parametrize("path", SUPPORTED_FILES, ids=lambda path: path.name)
def test_supported_corpus_file_parses(path: Path) -> None:
    result = PARSERS[command_of(path)](path.read_text())
    assert result is not None
    assert rejections(result) == ()  # a real capture never trips a bound or a line check


# --- specific values -----------------------------------------------------------------------------------


def test_link_up_910() -> None:
    record = hccn_link.parse(named("910-UP"))
    assert record.up is True
    assert hccn_link.samples(record, CHIP, CTX)[0].value == 1.0


def test_link_down_910b3_without_optics() -> None:
    record = hccn_link.parse(named("910B3-DOWN-no-optical-module"))
    assert record.up is False
    assert hccn_link.samples(record, CHIP, CTX)[0].value == 0.0


def test_optical_910b3_module_not_present() -> None:
    record = hccn_optical.parse(named("910B3-module-not-present"))
    assert record.present == "not present"
    assert record.temperature_celsius is None
    assert record.tx_power_watts == {}
    assert record.rx_power_watts == {}
    assert [s.metric for s in hccn_optical.samples(record, CHIP, CTX)] == []


def test_link_down_950_ub_port() -> None:
    assert hccn_link.parse(one("hccn_tool_-g_-link_-u_-p")).up is False


def test_link_stat_910a() -> None:
    record = hccn_link_stat.parse(one("hccn_tool_-link_stat_-g"))
    assert record.link_up_count == 2
    assert record.link_down_count is None
    assert record.current_time == datetime(2022, 8, 2, 3, 9, 26)
    assert [c.state for c in record.changes] == ["LINK UP", "LINK DOWN", "LINK UP"]
    assert record.newest_change is not None
    assert record.newest_change.at == datetime(2022, 8, 1, 14, 43, 40)


def test_link_stat_950_table() -> None:
    record = hccn_link_stat.parse(one("hccn_tool_-g_-link_stat"))
    assert (record.link_up_count, record.link_down_count) == (2, 2)
    assert len(record.changes) == 4
    assert record.changes[0].at == datetime(2026, 2, 9, 21, 45, 51)
    assert record.changes[1].state == "LINK DOWN"


@pytest.mark.parametrize(("fragment", "state", "healthy"), [
    ("910A-SocketFailed", "Socket failed", False),
    ("910-Init", "Init", False),
    ("910B-Success", "Success", True),
])
def test_net_health_states(fragment: str, state: str, healthy: bool) -> None:
    record = hccn_net_health.parse(named(fragment))
    assert record.state == state
    assert record.healthy is healthy


def test_optical_910a_qsfp() -> None:
    record = hccn_optical.parse(named("910A-QSFP"))
    assert record.present == "not present"
    assert record.temperature_celsius == 47.0
    assert record.tx_power_watts["0"] == pytest.approx(4.4035e-3)
    assert record.rx_power_watts["1"] == pytest.approx(5.4e-6)
    assert record.thresholds["txpower_high_watts"] == pytest.approx(3.5481e-3)
    assert record.snr_db["media3"] == pytest.approx(23.2969)
    assert "host0" not in record.snr_db  # not supported
    assert record.vendor["vendor_name"] == "Hisense"
    assert record.signal_lost is True  # Rx Los/LoL flags are 0xff in this capture
    metrics = [s.metric for s in hccn_optical.samples(record, CHIP, CTX)]
    assert metrics.count("npu_optical_tx_power_watts") == 4
    assert metrics.count("npu_optical_rx_power_watts") == 4


def test_stat_910a_and_950() -> None:
    record = hccn_stat.parse(one("hccn_tool_-stat_-g"))
    assert record.counters == {"roce_rx_err_pkt_num": 0, "roce_tx_err_pkt_num": 0}
    assert len(hccn_stat.samples(record, CHIP, CTX)) == 2
    ub = hccn_stat.parse(one("hccn_tool_-g_-stat_-u_-p"))
    assert ub.counters["port_id"] == 4
    exported = {dict(s.labels)["counter"] for s in hccn_stat.samples(ub, CHIP, CTX)}
    assert {"crc_error_sum", "retry_req_sum", "drop_ind_cnt_rx", "route_err_cnt_rx"} <= exported
    assert "ub_mem_pkt_cnt_rx" not in exported
    # neither prints octets or PFC frames: no traffic series, not a 0 in their place
    for listing in (record, ub):
        assert {s.metric for s in hccn_stat.samples(listing, CHIP, CTX)} == {"npu_roce_errors_total"}


def test_ip_910b1() -> None:
    assert hccn_ip.parse(one("hccn_tool_-ip_-g")) == hccn_ip.IpRecord("29.1.112.213", "255.255.0.0")


@pytest.mark.parametrize(("prefix", "dtype", "flops", "power"), [
    ("ascend-dmi_-f_-t_fp16", "fp16", 88.475e12, 85.1999969),
    ("ascend-dmi_-f_-t_int8", "int8", 176.950e12, 85.4000015),
])
def test_ascend_dmi_flops(prefix: str, dtype: str, flops: float, power: float) -> None:
    (result,) = ascend_dmi.parse_flops(one(prefix))
    assert (result.device, result.dtype) == (0, dtype)
    assert result.flops == pytest.approx(flops)
    assert result.power_watts == pytest.approx(power)
    assert result.execute_times == 600_000_000


@pytest.mark.parametrize(("prefix", "when", "mode", "item"), [
    ("ascend-dmi_-dg_-i_driver", datetime(2025, 5, 29, 19, 19, 35), "******", ("Hardware", "driver", "HEALTH")),
    ("ascend-dmi_-dg_-i_cann_-p", datetime(2025, 5, 29, 19, 17, 40), "******", ("Software", "cann", "PASS")),
    ("ascend-dmi_-dg_-i_device", datetime(2025, 5, 29, 19, 21, 8), "******", ("Hardware", "device", "HEALTH")),
    ("ascend-dmi_-dg_-i_network", datetime(2025, 5, 29, 19, 22, 43), "******", ("Hardware", "network", "PASS")),
    # The (Y/N)y prompt line comes first in this one.
    ("ascend-dmi_--dg_-i_bandwidth", datetime(2025, 5, 29, 19, 29, 6), "******", ("Hardware", "bandwidth", "PASS")),
])
def test_ascend_dmi_diagnosis_single_item(prefix: str, when: datetime, mode: str,
                                          item: tuple[str, str, str]) -> None:
    diagnosis = ascend_dmi_diag.parse(one(prefix))
    assert diagnosis.summary is not None
    assert (diagnosis.summary.arch, diagnosis.summary.mode, diagnosis.summary.time) == ("aarch64", mode, when)
    assert [(i.section, i.name, i.status, i.verdict, i.details) for i in diagnosis.items] == [(*item, "pass", ())]
    assert diagnosis.problems == ()


def test_ascend_dmi_diagnosis_all_scenes_cut_after_aicpu() -> None:
    diagnosis = ascend_dmi_diag.parse(one("ascend-dmi_--dg_--scene_healthCheck,performanceCheck,stressTest_-q"))
    assert diagnosis.summary is not None
    assert (diagnosis.summary.mode, diagnosis.summary.time) == ("*****", datetime(2025, 11, 11, 16, 16, 23))
    assert [(i.name, i.status) for i in diagnosis.items] == [
        ("driver", "HEALTH"), ("device", "HEALTH"), ("network", "PASS"), ("signalQuality", "PASS"),
        ("hbm", "PASS"), ("bandwidth", "PASS"), ("aiflops", "PASS"), ("hbmStress", "PASS"),
        ("bandwidthStress", "PASS"), ("aicore", "PASS"), ("edp", "PASS"), ("tdp", "PASS"), ("aicpu", None),
    ]
    assert {i.section for i in diagnosis.items} == {"Hardware"}
    assert all(i.known_item for i in diagnosis.items)
    assert [(i.name, i.verdict) for i in diagnosis.problems] == [("aicpu", "incomplete")]


def test_ascend_dmi_diagnosis_aicore_fail_with_details() -> None:
    diagnosis = ascend_dmi_diag.parse(one("ascend-dmi_--dg_-i_aicore_-s_-q"))
    assert diagnosis.summary is None
    (item,) = diagnosis.items
    assert (item.section, item.name, item.status, item.verdict) == ("Hardware", "aicore", "FAIL", "fail")
    assert item.details == ("Some processes are seizing the NPU. Test results may be affected.",
                            "Device 4: a timeout error occurred.")


# --- log excerpts with hccn_tool output ------------------------------------------------------------------


def blocks(text: str) -> dict[str, str]:
    """Split a transcript into {command line: output}; command lines start with '$ ' or a tool path."""
    result: dict[str, str] = {}
    command: str | None = None
    for line in text.splitlines():
        stripped = line.strip()
        if stripped.startswith("$ ") or stripped.startswith("/") or stripped.startswith("hccn_tool "):
            command = stripped.removeprefix("$ ")
            result[command] = ""
        elif command is not None:
            result[command] += line + "\n"
    return result


@pytest.mark.skipif(not LOGS.is_dir(), reason="corpus logs absent")
def test_log_link_stat_flap() -> None:
    (output,) = blocks((LOGS / "04_doc_hccn_tool_link_stat_flap.txt").read_text()).values()
    record = hccn_link_stat.parse(output)
    assert (record.link_up_count, record.link_down_count) == (2, 1)
    assert record.current_time == datetime(2025, 10, 28, 21, 46, 46)
    # The 1 s DOWN->UP flap: seen in a window around it, not in the last hour of the tool's clock.
    flap = hccn_link_stat.changes_within(record, 5, now=datetime(2025, 10, 5, 10, 13, 52))
    assert [c.state for c in flap] == ["LINK UP", "LINK DOWN"]
    assert hccn_link_stat.changes_within(record, 3600) == []


@pytest.mark.skipif(not LOGS.is_dir(), reason="corpus logs absent")
def test_log_fec_and_net_health_socket_failed() -> None:
    found = blocks((LOGS / "26_mc_fixture_hccn_fec_and_net_health_socket_failed.txt").read_text())
    (net_health,) = [out for command, out in found.items() if "-net_health" in command]
    record = hccn_net_health.parse(net_health)
    assert record.state == "Socket failed"
    labels = {s.labels for s in hccn_net_health.samples(record, CHIP, CTX)}
    assert (("npu", "0"), ("chip", "0"), ("state", "socket_failed")) in labels
