"""Text of the fake ``npu-smi``: the 910B table, ``-m``, ``-l`` and the ``-t <type>`` key/value pages.

Layouts follow real captures of 910B servers (98-column table, TAB + ``%-30s : %s`` lines, ``ecc``
padded to 40, ``Chip ID`` last as on newer drivers) and the printf formats of the open-sourced
npu-smi for ``hccs`` / ``hccs-bw`` / ``topo``.
"""

from __future__ import annotations

from agent.demo.render_common import kv_line
from agent.demo.render_model import (
    HBM_TOTAL_MB,
    HCCS_LINKS,
    bus_id,
    chip_reading,
    cpu_affinity,
    ecc_counts,
    hccs_packets,
    total_count,
)
from agent.demo.state import DemoState

__all__ = [
    "DRIVER_VERSION",
    "USAGE_LINE",
    "render_kv_type",
    "render_list",
    "render_mapping",
    "render_table",
    "render_topo",
]

DRIVER_VERSION = "24.1.rc2"
FIRMWARE_VERSION = "7.5.0.1.129"
MISMATCHED_FIRMWARE = "7.5.0.1.120"  # the `firmware_mismatch` fault's default
USAGE_LINE = "Usage: npu-smi info <watch|proc|-h|-m|-l|-t type> [Options...]\n"

_FULL_DASH = "+" + "-" * 96 + "+\n"
_HEAD_1 = "| NPU   Name                | Health        | Power(W)    Temp(C)           Hugepages-Usage(page)|"
_HEAD_2 = "| Chip                      | Bus-Id        | AICore(%)   Memory-Usage(MB)  HBM-Usage(MB)        |"
_HEAD_P = "| NPU     Chip              | Process id    | Process name             | Process memory(MB)      |"
_COL_DASH = "+" + "-" * 27 + "+" + "-" * 15 + "+" + "-" * 52 + "+\n"
_COL_EQ = "+" + "=" * 27 + "+" + "=" * 15 + "+" + "=" * 52 + "+\n"
_DEFAULT_PID_BASE = 3_325_900

# Demo descriptions for error codes; unknown codes get a generic sensor line.
_ERROR_TEXT = {
    "8C084E00": "node type=HBMA, sensor type=Memory, event state=Uncorrectable ECC error (multi-bit)",
    "8C03A000": "node type=AICORE, sensor type=General Software, event state=Task execution timeout",
    "A4025021": "node type=adda, sensor type=Heartbeat Sensor, event state=Heartbeat Lost.",
    "80E18005": "node type=HBMA, sensor type=Memory, event state=Isolated page count over threshold",
}


def _usage(used: int, total: int) -> str:
    return f"{used:<5d}/ {total}"


def _row(first: str, second: str, third: str) -> str:
    return f"|{first}|{second}|{third}|\n"


def health_of(state: DemoState, npu: int) -> tuple[str, list[str]]:
    """(health word, active error codes) of a chip."""
    fault = state.chip_fault(npu, "health")
    if fault is None:
        return "OK", []
    return str(fault.get("state", "Alarm")), [str(c).upper() for c in fault.get("codes", ["8C084E00"])]


def processes_of(state: DemoState, npu: int) -> list[tuple[int, str, int]]:
    """(pid, name, memory MB) rows for the process table."""
    fault = state.chip_fault(npu, "process")
    if fault is None:
        return []
    pid = int(fault.get("pid", _DEFAULT_PID_BASE + 17 * npu))
    return [(pid, str(fault.get("name", "python3"))[:15], int(fault.get("memory_mb", 20480)))]


def render_table(state: DemoState, now: float) -> str:
    """``npu-smi info``: device table, then the process table."""
    banner = f"| {'npu-smi ' + DRIVER_VERSION:<33}{'Version: ' + DRIVER_VERSION:<62}|\n"
    out = [
        _FULL_DASH,
        banner,
        _COL_DASH,
        _HEAD_1 + "\n",
        _HEAD_2 + "\n",
        _COL_EQ,
    ]
    chips = state.visible_chips()
    for npu in chips:
        reading = chip_reading(state, npu, now)
        health, _ = health_of(state, npu)
        out.append(
            _row(
                f" {npu:<6}{state.model:<20}",
                f" {health:<14}",
                f" {reading.power_w:<12.1f}{reading.temp_c:<18}{_usage(0, 0):<21}",
            )
        )
        out.append(
            _row(
                f" {0:<26}",
                f" {bus_id(npu):<14}",
                f" {reading.aicore_pct:<12}{_usage(0, 0):<18}{_usage(reading.hbm_used_mb, HBM_TOTAL_MB):<21}",
            )
        )
        out.append(_COL_EQ)
    out += [
        _COL_DASH,
        _HEAD_P + "\n",
        _COL_EQ,
    ]
    for npu in chips:
        rows = processes_of(state, npu)
        if not rows:
            out.append(f"| {'No running processes found in NPU ' + str(npu):<95}|\n")
        for pid, name, memory_mb in rows:
            out.append(_row(f" {npu:<8}{0:<18}", f" {pid:<14}", f" {name:<25}| {memory_mb:<24}"))
        out.append(_COL_EQ)
    return "".join(out)


def render_mapping(state: DemoState) -> str:
    """``npu-smi info -m``: one Ascend chip and one Mcu row per NPU (910B servers)."""
    out = [f"\t{'NPU ID':<30} {'Chip ID':<30} {'Chip Logic ID':<30} Chip Name\n"]
    for npu in state.visible_chips():
        out.append(f"\t{npu:<30} {0:<30} {npu:<30} Ascend {state.model}\n")
        out.append(f"\t{npu:<30} {1:<30} {'-':<30} Mcu\n")
    return "".join(out)


def render_list(state: DemoState) -> str:
    """``npu-smi info -l``."""
    chips = state.visible_chips()
    blocks = [kv_line("Total Count", len(chips))]
    blocks += [kv_line("NPU ID", npu) + kv_line("Chip Count", 1) for npu in chips]
    return "\n".join(blocks)


def render_topo(state: DemoState) -> str:
    """``npu-smi info -t topo``: an HCCS full mesh with CPU affinity, then the legend."""
    chips = state.visible_chips()
    out = ["\t   " + "".join(f"NPU{npu:<8}" for npu in chips) + "CPU Affinity\n"]
    for row in chips:
        cells = "".join(f"{'X' if col == row else 'HCCS':<11}" for col in chips)
        out.append(f"NPU{row:<8}{cells}{cpu_affinity(row)}\n")
    out.append(
        "\nLegend:\n"
        "  X    = Self\n"
        "  SYS  = Path traversing PCIe and NUMA nodes. Nodes are connected through SMP, such as QPI, UPI.\n"
        "  PHB  = Path traversing PCIe and the PCIe host bridge of a CPU.\n"
        "  PIX  = Path traversing a single PCIe switch\n"
        "  PXB  = Path traversing multipul PCIe switches\n"
        "  HCCS = Connection traversing HCCS.\n"
    )
    return "".join(out)


def _card_header(npu: int) -> str:
    return kv_line("NPU ID", npu) + kv_line("Chip Count", 1) + "\n"


def _usages(state: DemoState, npu: int, now: float) -> str:
    r = chip_reading(state, npu, now)
    rows = [
        ("DDR Capacity(MB)", 0),
        ("DDR Usage Rate(%)", 0),
        ("DDR Hugepages Total(page)", 0),
        ("DDR Hugepages Usage Rate(%)", 0),
        ("HBM Capacity(MB)", HBM_TOTAL_MB),
        ("HBM Usage Rate(%)", round(100 * r.hbm_used_mb / HBM_TOTAL_MB)),
        ("Aicore Usage Rate(%)", r.aicore_pct),
        ("Aivector Usage Rate(%)", r.aivector_pct),
        ("Aicpu Usage Rate(%)", r.aicpu_pct),
        ("Ctrlcpu Usage Rate(%)", r.ctrlcpu_pct),
        ("DDR Bandwidth Usage Rate(%)", 0),
        ("HBM Bandwidth Usage Rate(%)", r.hbm_bw_pct),
        ("Chip ID", 0),
    ]
    return _card_header(npu) + "".join(kv_line(k, v) for k, v in rows)


def _common(state: DemoState, npu: int, now: float) -> str:
    r = chip_reading(state, npu, now)
    rows = [
        ("Memory Usage Rate(%)", 0),
        ("HBM Usage Rate(%)", round(100 * r.hbm_used_mb / HBM_TOTAL_MB)),
        ("Aicore Usage Rate(%)", r.aicore_pct),
        ("Aicore Freq(MHZ)", 1800),
        ("Aicore curFreq(MHZ)", r.aicore_freq_mhz),
        ("Aicore Count", 20),
        ("Temperature(C)", r.temp_c),
        ("NPU Real-time Power(W)", f"{r.power_w:.1f}"),
        ("Chip ID", 0),
    ]
    mcu = kv_line("Temperature(C)", 36 + npu % 4) + kv_line("Chip Name", "mcu")
    return _card_header(npu) + "".join(kv_line(k, v) for k, v in rows) + "\n" + mcu


def _power(state: DemoState, npu: int, now: float) -> str:
    r = chip_reading(state, npu, now)
    return _card_header(npu) + kv_line("NPU Real-time Power(W)", f"{r.power_w:.1f}") + kv_line("Chip ID", 0)


def _temp(state: DemoState, npu: int, now: float) -> str:
    r = chip_reading(state, npu, now)
    return _card_header(npu) + kv_line("Temperature(C)", r.temp_c) + kv_line("Chip ID", 0)


def _memory(state: DemoState, npu: int, now: float) -> str:
    r = chip_reading(state, npu, now)
    rows = [
        ("DDR Capacity(MB)", 0),
        ("DDR Clock Speed(MHz)", 0),
        ("HBM Capacity(MB)", HBM_TOTAL_MB),
        ("HBM Clock Speed(MHz)", 1600),
        ("HBM Temperature(C)", r.hbm_temp_c),
        ("HBM Manufacturer ID", "0x5A"),
        ("Chip ID", 0),
    ]
    return _card_header(npu) + "".join(kv_line(k, v) for k, v in rows)


def _ecc(state: DemoState, npu: int, now: float) -> str:
    single, double, single_total, double_total = ecc_counts(state, npu, now)
    rows: list[tuple[str, int]] = []
    for kind, counts in (("DDR", (0, 0, 0, 0)), ("HBM", (single, double, single_total, double_total))):
        rows += [
            (f"{kind} Single Bit Error Count", counts[0]),
            (f"{kind} Double Bit Error Count", counts[1]),
            (f"{kind} Single Bit Aggregate Total Err Cnt", counts[2]),
            (f"{kind} Double Bit Aggregate Total Err Cnt", counts[3]),
            (f"{kind} Single Bit Isolated Pages Count", 0),
            # a page retired for a double-bit error stays retired after the fault is cleared
            (f"{kind} Double Bit Isolated Pages Count", counts[3]),
        ]
    header = kv_line("NPU ID", npu, 40) + kv_line("Chip Count", 1, 40) + "\n"
    return header + "".join(kv_line(k, v, 40) for k, v in rows) + kv_line("Chip ID", 0, 40)


def _health(state: DemoState, npu: int, now: float) -> str:
    health, codes = health_of(state, npu)
    out = kv_line("Health Status", health)
    if not codes:
        return out + kv_line("Error Code", "NA") + kv_line("Error Information", "NA")
    out += kv_line("Error Code", " ".join(codes))
    generic = "node type=npu, sensor type=General Software, event code={}"
    texts = [_ERROR_TEXT.get(code, generic.format(code)) for code in codes]
    out += kv_line("Error Information", texts[0])
    for text in texts[1:]:
        out += "\n" + kv_line(" ", text)
    return out


def _board(state: DemoState, npu: int, chip: int | None) -> str:
    odd = state.chip_fault(npu, "firmware_mismatch")
    firmware = str(odd.get("version", MISMATCHED_FIRMWARE)) if odd is not None else FIRMWARE_VERSION
    if chip is not None:
        rows: list[tuple[str, object]] = [
            ("NPU ID", npu),
            ("Chip ID", chip),
            ("Chip Type", "Ascend"),
            ("Chip Name", state.model),
            ("Chip Version", "V1"),
            ("Board ID", "0x64"),
            ("PCB ID", "A"),
            ("BOM ID", 1),
            ("Chip Position ID", npu),
            ("PCIe Bus Info", bus_id(npu)),
            ("Firmware Version", firmware),
        ]
    else:
        rows = [
            ("NPU ID", npu),
            ("Software Version", DRIVER_VERSION),
            ("Firmware Version", firmware),
            ("Compatibility", "OK"),
            ("Board ID", "0x64"),
            ("PCB ID", "A"),
            ("BOM ID", 1),
            ("PCIe Bus Info", bus_id(npu)),
            ("Slot ID", npu),
            ("Class ID", "NA"),
            ("PCI Vendor ID", "0x19E5"),
            ("PCI Device ID", "0xD802"),
            ("Subsystem Vendor ID", "0x19E5"),
            ("Subsystem Device ID", "0x3000"),
            ("Serial Number", f"102{state.seed % 10}C9{40000 + npu * 137:05d}"),
            ("Chip Count", 1),
        ]
    return "".join(kv_line(k, v) for k, v in rows)


def _array(values: list[int] | list[str]) -> str:
    return "[" + "".join(f"{v:<20} " for v in values) + "]"


def _hccs(state: DemoState, npu: int, now: float) -> str:
    fault = state.chip_fault(npu, "hccs_error")
    errors = [0] * HCCS_LINKS
    errors[0] = int(total_count(state, npu, "hccs_errors", now))  # counts on after the fault is cleared
    packets = [hccs_packets(state, npu, link, now) for link in range(HCCS_LINKS)]
    tx = [p[0] for p in packets]
    rx = [p[1] for p in packets]
    lines = [
        kv_line("hccs health status", "NOK" if fault is not None else "OK"),
        kv_line("hccs lane mode", _array([4] * HCCS_LINKS)),
        kv_line("hccs link lane list", "[" + ("1111" + " " * 16 + " ") * HCCS_LINKS + "]"),
        kv_line("hccs link speed", _array([224] * HCCS_LINKS)),
        kv_line("hccs tx packets", _array(tx)),
        kv_line("hccs tx bytes", _array([20 * v for v in tx])),
        kv_line("hccs rx packets", _array(rx)),
        kv_line("hccs rx bytes", _array([20 * v for v in rx])),
        kv_line("hccs retry count", _array([e // 2 for e in errors])),
        kv_line("hccs error count", _array(errors)),
        kv_line("hccs first error lane", 0 if fault is not None else "NA"),
    ]
    return "".join(lines)


def _hccs_bw(state: DemoState, npu: int, now: float) -> str:
    load = chip_reading(state, npu, now).aicore_pct / 100
    out = [f"{'hccs link':<30} {'tx_bandwidth(GB/S)':<30} {'rx_bandwidth(GB/S)':<30}\n"]
    total_tx = total_rx = 0.0
    for link in range(HCCS_LINKS):  # the port index from 0, as `-t hccs` arrays are numbered
        tx = 25.0 * load * (0.87 + 0.02 * link)
        rx = 25.0 * load * (0.875 + 0.015 * link)
        total_tx += tx
        total_rx += rx
        out.append(f"{link:<35d} {tx:<30.6f} {rx:<30.6f}\n")
    out.append(f"{'total':<35} {total_tx:<30.6f} {total_rx:<30.6f}\n")
    return "".join(out)


_KV_TYPES = {
    "usages": _usages,
    "common": _common,
    "power": _power,
    "temp": _temp,
    "memory": _memory,
    "ecc": _ecc,
    "health": _health,
    "hccs": _hccs,
    "hccs-bw": _hccs_bw,
}
KV_TYPES = frozenset({*_KV_TYPES, "board"})


def render_kv_type(state: DemoState, info_type: str, npu: int, chip: int | None, now: float) -> str:
    """``npu-smi info -t <info_type> -i <npu> [-c <chip>]`` for a chip that exists."""
    if info_type == "board":
        return _board(state, npu, chip)
    return _KV_TYPES[info_type](state, npu, now)
