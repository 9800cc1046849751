"""DCMI readings -> the record types of the npu-smi parsers, so their ``samples`` builders serve both.

Each function takes what the worker returned (``readings``, in the library's units) and returns the
record an npu-smi parser returns for the same facts, with the same units and the same bounds
(``collectors.bounds``: an impossible value is None and listed in ``rejected``). Where npu-smi has no
record for a fact (the chip's ids, a process's memory per chip) the reading itself is the record.

Units (docs/dcmi.md, "Units"): power 0.1 W -> W; rates % -> ratio 0..1; clocks MHz -> Hz; HBM and
DDR sizes MB -> bytes with MB = 2^20 bytes, which is npu-exporter's reading of ``dcmi_hbm_info``
(an older header comment says KB; to be settled against ``npu-smi info -t memory`` on a node);
health 0 -> ``OK``, 1/2/3 -> ``Warning``/``Alarm``/``Critical`` (the words npu-smi prints; the
numbers are the DCMI manual's alarm levels, an assumption until a node confirms them).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from collectors.bounds import LIMITS, MIB, Rejects
from collectors.dcmi.readings import (
    BoardReading,
    ChipId,
    ChipInfoReading,
    EccReading,
    HbmReading,
    MemoryReading,
    PcieReading,
    ProcessReading,
)
from collectors.hccn_net_health import NetHealthRecord
from collectors.npu_smi_board import BoardRecord
from collectors.npu_smi_common import CommonRecord
from collectors.npu_smi_ecc import EccCounts, EccRecord
from collectors.npu_smi_health import HealthRecord
from collectors.npu_smi_info_records import ChipStatus, NpuProcess
from collectors.npu_smi_memory import MemoryRecord
from collectors.npu_smi_power import PowerRecord
from collectors.npu_smi_temp import TempRecord
from collectors.npu_smi_usages import UsagesRecord

__all__ = [
    "HEALTH_WORDS",
    "NET_HEALTH_STATES",
    "board_record",
    "bus_id",
    "chip_status",
    "common_record",
    "ecc_record",
    "error_code_text",
    "health_record",
    "health_word",
    "memory_record",
    "net_health_record",
    "power_record",
    "power_watts",
    "processes",
    "temp_record",
    "usages_record",
]

MHZ = 1e6
HEALTH_WORDS = {0: "OK", 1: "Warning", 2: "Alarm", 3: "Critical"}
# enum dcmi_rdfx_detect_result -> the state hccn_tool prints. Success, Fault, Init and Socket failed
# are hccn_tool's own words (collectors.hccn_net_health); the others are named after the enum.
NET_HEALTH_STATES = {
    0: "Success", 1: "Socket failed", 2: "Receive timeout", 3: "Unreachable", 4: "Time exceeded", 5: "Fault",
    6: "Init", 7: "Thread error", 8: "IP set",
}
# utilization input_type -> UsagesRecord field
_USAGE_FIELDS = {
    1: "ddr_usage_ratio", 2: "aicore_usage_ratio", 3: "aicpu_usage_ratio", 6: "hbm_usage_ratio",
    10: "hbm_bandwidth_usage_ratio", 12: "vectorcore_usage_ratio", 13: "npu_utilization_ratio",
    14: "aicube_usage_ratio",
}
FREQ_AICORE_CURRENT = 7
FREQ_AICORE_MAX = 9
FREQ_DDR = 1
FREQ_HBM = 6


def error_code_text(code: int) -> str:
    """An event id as npu-smi prints it: 8 upper-case hex digits, no ``0x`` (``80E01801``)."""
    return f"{code & 0xFFFFFFFF:08X}"


def health_word(health: int) -> str:
    """npu-smi's word for a DCMI health value (``UNKNOWN`` beyond the four levels)."""
    return HEALTH_WORDS.get(health, "UNKNOWN")


def power_watts(tenths: int) -> float:
    return tenths / 10.0


def _ratio(rejects: Rejects, percent: int | None, what: str) -> float | None:
    checked = rejects.value("percent", None if percent is None else float(percent), what=what)
    return None if checked is None else checked / 100.0


def _mib(rejects: Rejects, size_mb: int | None, what: str) -> float | None:
    return rejects.value("memory_bytes", None if size_mb is None else float(size_mb) * MIB, what=what)


def _hertz(rejects: Rejects, mhz: int | None, what: str) -> float | None:
    return rejects.value("frequency_hertz", None if mhz is None else float(mhz) * MHZ, what=what)


def temp_record(celsius: int) -> TempRecord:
    rejects = Rejects()
    value = rejects.value("temperature_celsius", float(celsius), what="DCMI temperature")
    return TempRecord(temperature_celsius=value, rejected=rejects.freeze())


def power_record(tenths_watt: int) -> PowerRecord:
    rejects = Rejects()
    value = rejects.value("power_watts", power_watts(tenths_watt), what="DCMI power")
    return PowerRecord(power_watts=value, rejected=rejects.freeze())


def health_record(health: int, codes: Sequence[int] = ()) -> HealthRecord:
    """Health word and active codes; at most ``LIMITS["error_codes"]`` distinct codes, as the parser keeps."""
    rejects = Rejects()
    texts = tuple(dict.fromkeys(error_code_text(code) for code in codes))
    limit = LIMITS["error_codes"]
    if len(texts) > limit:
        rejects.add(f"{len(texts)} error codes, more than {limit}; the first {limit} are kept")
        texts = texts[:limit]
    return HealthRecord(health=health_word(health), error_codes=texts, rejected=rejects.freeze())


def usages_record(utilization: Mapping[int, int], hbm: HbmReading | None = None,
                  memory: MemoryReading | None = None) -> UsagesRecord:
    """``-t usages``: rates by input_type (missing types None), capacities from the HBM and DDR readings."""
    rejects = Rejects()
    values: dict[str, float | None] = {
        field: _ratio(rejects, utilization.get(input_type), f"DCMI {field}")
        for input_type, field in _USAGE_FIELDS.items()
    }
    if hbm is not None:
        values["hbm_capacity_bytes"] = _mib(rejects, hbm.memory_size, "DCMI HBM size")
        if values["hbm_bandwidth_usage_ratio"] is None:
            values["hbm_bandwidth_usage_ratio"] = _ratio(rejects, hbm.bandwidth_util_percent,
                                                         "DCMI HBM bandwidth rate")
    if memory is not None:
        values["ddr_capacity_bytes"] = _mib(rejects, memory.memory_size_mb, "DCMI DDR size")
        values["ddr_hugepages_total_pages"] = rejects.value("hugepages", float(memory.hugepages_total),
                                                            what="DCMI hugepages")
        if values["ddr_usage_ratio"] is None:
            values["ddr_usage_ratio"] = _ratio(rejects, memory.utilization_percent, "DCMI DDR usage")
    return UsagesRecord(**values, rejected=rejects.freeze())


def memory_record(hbm: HbmReading | None = None, memory: MemoryReading | None = None) -> MemoryRecord:
    """``-t memory``: capacities, clocks and the HBM temperature."""
    rejects = Rejects()
    return MemoryRecord(
        ddr_capacity_bytes=_mib(rejects, memory.memory_size_mb, "DCMI DDR size") if memory else None,
        ddr_clock_hertz=_hertz(rejects, memory.freq_mhz, "DCMI DDR clock") if memory else None,
        hbm_capacity_bytes=_mib(rejects, hbm.memory_size, "DCMI HBM size") if hbm else None,
        hbm_clock_hertz=_hertz(rejects, hbm.freq_mhz, "DCMI HBM clock") if hbm else None,
        hbm_temperature_celsius=rejects.value("temperature_celsius", float(hbm.temperature_celsius),
                                              what="DCMI HBM temperature") if hbm else None,
        rejected=rejects.freeze(),
    )


def _counts(rejects: Rejects, reading: EccReading | None, memory: str) -> EccCounts:
    if reading is None:
        return EccCounts()
    values = {
        name: rejects.value("counter", float(getattr(reading, name)), what=f"DCMI {memory} {name}")
        for name in ("single_bit_errors", "double_bit_errors", "single_bit_total_errors", "double_bit_total_errors",
                     "single_bit_isolated_pages", "double_bit_isolated_pages", "single_bit_next_isolated_pages",
                     "double_bit_next_isolated_pages")
    }
    return EccCounts(**values)


def ecc_record(ddr: EccReading | None = None, hbm: EccReading | None = None) -> EccRecord:
    """``-t ecc``: the counters of each memory read (field names match: the parser's ``EccCounts``)."""
    rejects = Rejects()
    return EccRecord(ddr=_counts(rejects, ddr, "DDR"), hbm=_counts(rejects, hbm, "HBM"), rejected=rejects.freeze())


def common_record(frequencies: Mapping[int, int], temperature: int | None = None, power_tenths: int | None = None,
                  chip_info: ChipInfoReading | None = None,
                  utilization: Mapping[int, int] | None = None) -> CommonRecord:
    """``-t common``: AI Core clocks (freq types 7, 9), count, temperature, power, AI Core and HBM rates."""
    rejects = Rejects()
    rates = utilization or {}
    return CommonRecord(
        hbm_usage_ratio=_ratio(rejects, rates.get(6), "DCMI HBM usage"),
        aicore_usage_ratio=_ratio(rejects, rates.get(2), "DCMI AI Core usage"),
        aicore_max_frequency_hertz=_hertz(rejects, frequencies.get(FREQ_AICORE_MAX), "DCMI AI Core max clock"),
        aicore_frequency_hertz=_hertz(rejects, frequencies.get(FREQ_AICORE_CURRENT), "DCMI AI Core clock"),
        aicore_count=rejects.value("aicore_count", float(chip_info.aicore_count), what="DCMI AI Core count")
        if chip_info else None,
        temperature_celsius=rejects.value("temperature_celsius", float(temperature), what="DCMI temperature")
        if temperature is not None else None,
        power_watts=rejects.value("power_watts", power_watts(power_tenths), what="DCMI power")
        if power_tenths is not None else None,
        rejected=rejects.freeze(),
    )


def bus_id(pcie: PcieReading) -> str:
    """The PCI address as npu-smi prints it (``0000:82:00.0``, upper-case hex)."""
    return f"{pcie.domain:04X}:{pcie.bus:02X}:{pcie.device:02X}.{pcie.function:X}"


def board_record(board: BoardReading | None = None, chip_info: ChipInfoReading | None = None,
                 pcie: PcieReading | None = None) -> BoardRecord:
    """``-t board`` facts DCMI has (no serial, software or firmware version: those stay npu-smi's)."""
    return BoardRecord(
        board_id=f"0x{board.board_id:X}" if board else None,
        pcb_id=str(board.pcb_id) if board else None,
        bom_id=str(board.bom_id) if board else None,
        slot_id=str(board.slot_id) if board else None,
        chip_name=chip_info.chip_name or None if chip_info else None,
        chip_type=chip_info.chip_type or None if chip_info else None,
        pcie_bus_info=bus_id(pcie) if pcie else None,
        pci_vendor_id=f"0x{pcie.vendor_id:04X}" if pcie else None,
        pci_device_id=f"0x{pcie.device_id:04X}" if pcie else None,
        subsystem_vendor_id=f"0x{pcie.subvendor_id:04X}" if pcie else None,
        subsystem_device_id=f"0x{pcie.subdevice_id:04X}" if pcie else None,
    )


def net_health_record(result: int) -> NetHealthRecord:
    """RoCE detection result as ``hccn_tool -net_health`` reports it."""
    return NetHealthRecord(state=NET_HEALTH_STATES.get(result, f"Result {result}"))


def processes(chip: ChipId, readings: Sequence[ProcessReading]) -> tuple[NpuProcess, ...]:
    """The info table's process rows of one chip (npu = card id, chip = device id; no process name)."""
    if chip.card_id is None or chip.device_id is None:
        return ()
    return tuple(NpuProcess(npu=chip.card_id, chip=chip.device_id, pid=reading.pid, name="",
                            memory_bytes=float(reading.memory_bytes), container_pid=None)
                 for reading in readings[:LIMITS["processes"]] if reading.pid > 0)


def chip_status(chip: ChipId, *, health: int, chip_info: ChipInfoReading | None = None,
                power_tenths: int | None = None, temperature: int | None = None,
                aicore_percent: int | None = None, hbm: HbmReading | None = None,
                memory: MemoryReading | None = None, pcie: PcieReading | None = None) -> ChipStatus | None:
    """The info table's row of one chip (None without a card/device pair: the table is keyed by them).

    ``device_id`` carries the logical id (the info table's "Device" column); HBM used/total are
    ``memory_usage``/``memory_size`` (MB assumed), DDR used is size minus available.
    """
    if chip.card_id is None or chip.device_id is None:
        return None
    rejects = Rejects()
    used_ddr = None if memory is None else memory.memory_size_mb - memory.memory_available_mb
    return ChipStatus(
        npu=chip.card_id, chip=chip.device_id, has_chip_id=True, phy_id=chip.phy_id, device_id=chip.logic_id,
        name=chip_info.chip_name if chip_info else "",
        health=health_word(health),
        bus_id=bus_id(pcie) if pcie else None,
        power_watts=rejects.value("power_watts", power_watts(power_tenths)) if power_tenths is not None else None,
        temperature_celsius=rejects.value("temperature_celsius", float(temperature))
        if temperature is not None else None,
        aicore_ratio=_ratio(rejects, aicore_percent, "DCMI AI Core usage"),
        hugepages_used=float(memory.hugepages_total - memory.hugepages_free) if memory else None,
        hugepages_total=float(memory.hugepages_total) if memory else None,
        memory_used_bytes=_mib(rejects, used_ddr, "DCMI DDR used"),
        memory_total_bytes=_mib(rejects, memory.memory_size_mb, "DCMI DDR size") if memory else None,
        hbm_used_bytes=_mib(rejects, hbm.memory_usage, "DCMI HBM used") if hbm else None,
        hbm_total_bytes=_mib(rejects, hbm.memory_size, "DCMI HBM size") if hbm else None,
    )
