"""Saved tool outputs and metric series as local faults: recognising, dating, judging."""

from __future__ import annotations

import time

import pytest

from agent.triage.series import faults_from_samples, parse_exposition
from agent.triage.snapshots import ToolReadings, device_from_name, recognise
from tests.support.paths import CORPUS

T = 1_761_300_000.0


def ctime(at: float) -> str:
    return time.asctime(time.localtime(at))


@pytest.mark.parametrize(("prefix", "expected"), [
    ("hccn_tool_-link_-g__910B3-DOWN", "link"),
    ("hccn_tool_-link_stat_-g__910A", "link_stat"),
    ("hccn_tool_-net_health_-g__910A-SocketFailed", "net_health"),
    ("hccn_tool_-optical_-g__910A-QSFP", "optical"),
    ("hccn_tool_-stat_-g__910A", "stat"),
    ("hccn_tool_-ip_-g__910B1", "ip"),
    ("npu-smi_info_-t_health__910A-Alarm", "health"),
    ("npu-smi_info_-t_ecc__910-DDR+HBM", "ecc"),
    ("npu-smi_info__910B4-x8", "info"),
    ("cat_etc-hccn.conf", "hccn_conf"),
])
def test_corpus_outputs_are_recognised_by_content(prefix: str, expected: str) -> None:
    tools = CORPUS / "tools"
    if not tools.is_dir():
        pytest.skip("no shared corpus here")
    (path,) = [p for p in tools.iterdir() if p.name.startswith(prefix)]
    assert recognise(path.read_text(errors="replace")) == expected


def test_other_text_is_not_a_tool_output() -> None:
    assert recognise("[ERROR] HCCL(1,p):2025-10-24-10:00:00.000.000 [t.cc:1] Task run failed\n") is None
    assert recognise("loss 1.234 step 100\n") is None


def test_device_from_name() -> None:
    assert device_from_name("hccn_tool_-i_3_-link_-g.txt") == 3
    assert device_from_name("npu5_optical.txt") == 5
    assert device_from_name("link.7.txt") == 7
    assert device_from_name("whatever.txt", "[devid 2]link up count : 1\n") == 2
    assert device_from_name("link.txt") is None


def test_link_down_is_dated_by_link_stat_and_flaps_are_counted() -> None:
    tools = ToolReadings("n")
    tools.add("link", 1, "link status: DOWN\n", T + 900)
    tools.add("link_stat", 1, f"[devid 1]current time        : {ctime(T + 900)}\n[devid 1]link up count       : 1\n"
              f"[devid 1]link change records :\n[devid 1]    {ctime(T - 300)}    LINK DOWN\n"
              f"[devid 1]    {ctime(T - 86400)}    LINK UP\n", T + 900)
    records = [(T - 1000, "LINK DOWN"), (T - 990, "LINK UP"), (T - 500, "LINK DOWN"), (T - 490, "LINK UP")]
    tools.add("link", 2, "link status: UP\n", T + 900)
    tools.add("link_stat", 2, f"[devid 2]current time        : {ctime(T + 900)}\n[devid 2]link up count       : 3\n"
              "[devid 2]link change records :\n"
              + "".join(f"[devid 2]    {ctime(at)}    {state}\n" for at, state in reversed(records)), T + 900)
    faults, _ = tools.judge()
    by = {(f.npu, f.kind): f for f in faults}
    assert by[(1, "link_down")].at == T - 300
    assert by[(1, "link_down")].seen_at == T + 900
    assert by[(2, "link_flap")].at == T - 1000
    assert by[(2, "link_flap")].until == T - 490
    assert "2 link-down events" in by[(2, "link_flap")].detail
    assert (2, "link_down") not in by


def test_chips_optics_ecc_and_addresses() -> None:
    tools = ToolReadings("n")
    tools.add("health", 4, "Health Status                  : Alarm\nError Code                     : 80E18005\n", T)
    tools.add("ecc", 5, "HBM Single Bit Error Count     : 0\nHBM Double Bit Error Count     : 2\n", T)
    tools.add("optical", 6, "Rx Power0 : 0.0000 mW\nRx Power1 : 0.0000 mW\nRx Los Flag : 0xff\n", T)
    tools.add("stat", 7, "packet statistics:\nroce_rx_err_pkt_num:12\nroce_tx_all_pkt_num:100\n", T)
    tools.add("ip", 6, "ipaddr:29.1.6.16\nnetmask:255.255.0.0\n", T)
    tools.add("hccn_conf", None, "address_6=29.1.6.99\naddress_7=29.1.7.17\n", T)
    faults, addresses = tools.judge()
    kinds = {(f.npu, f.kind) for f in faults}
    assert kinds == {(4, "chip_fault_reset"), (5, "hbm_dbe"), (6, "optics_dark"), (7, "roce_error_counters"),
                     (6, "ip_mismatch")}
    assert {(a.ip, a.npu) for a in addresses} == {("29.1.6.16", 6), ("29.1.6.99", 6), ("29.1.7.17", 7)}


def test_the_agents_findings_are_the_local_faults_and_no_reading_is_judged() -> None:
    raw = (
        '# TYPE npu_roce_link_up gauge\nnpu_roce_link_up{npu="1",chip="0"} 0\n'
        '# TYPE npu_health_state gauge\nnpu_health_state{npu="5",chip="0",state="alarm"} 1\n'
        '# TYPE npu_probe_gemm_efficiency_ratio gauge\n'
        'npu_probe_gemm_efficiency_ratio{npu="0",chip="0",dtype="fp16"} 0.75\n')
    assert faults_from_samples("n", parse_exposition(raw), T) == []  # readings without the agent's judgement
    exposition = raw + (
        '# TYPE npu_fault_since_timestamp_seconds gauge\n'
        f'npu_fault_since_timestamp_seconds{{npu="1",chip="0",kind="link_down",status="fail"}} {T - 60}\n'
        f'npu_fault_since_timestamp_seconds{{npu="5",chip="0",kind="chip_fault_drain",status="warn"}} {T - 5}\n'
        f'npu_fault_since_timestamp_seconds{{npu="0",chip="0",kind="probe_failed",status="fail"}} {T - 9}\n'
        f'npu_fault_since_timestamp_seconds{{npu="",chip="",kind="chip_missing",status="fail"}} {T - 7}\n'
        f'npu_fault_since_timestamp_seconds{{npu="",chip="",kind="agent",status="fail"}} {T - 7}\n')
    faults = faults_from_samples("n", parse_exposition(exposition), T)
    # the agent's kinds as it judged them: 0.75 of peak is probe_failed (the probe limits), a chip at a handling
    # level is that level, not also "unhealthy"; a finding without a fault kind (a collector down) is no fault
    assert {(f.npu, f.kind) for f in faults} == {(1, "link_down"), (5, "chip_fault_drain"), (0, "probe_failed"),
                                                  (None, "chip_missing")}
    assert next(f for f in faults if f.kind == "link_down").at == T - 60
    assert parse_exposition("not { an exposition") == []
