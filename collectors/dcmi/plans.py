"""Which collector sources DCMI can serve, and with which calls: the records each source's own parser
would return, built from DCMI readings (``records``), so the source's ``samples`` serve both backends.

A plan is pure over ``call(name, **args)``, the DCMI client's call (``agent.dcmi.client``): it raises
the typed errors of ``collectors.dcmi.errors``, and the caller falls back to the tool for that
reading. A reading the chip does not have (``DcmiUnsupported``, or a return code meaning "not
supported") is absent from the record where npu-smi may also leave it out (rates, clocks, one
memory's ECC); where it is the point of the source (the health word, power in the common block)
the error goes up and the tool serves the reading.

Sources that stay with their tool: ``npu_smi_board`` (serial, firmware and driver versions, which
``npu_info`` carries, are not DCMI's), ``npu_smi_hccs``/``npu_smi_hccs_bw`` (no DCMI call in this
backend yet), ``npu_smi_topo``, ``npu_smi_list`` and the hccn_tool sources other than net health.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from collectors.bounds import RowTuple
from collectors.dcmi import records
from collectors.dcmi.errors import DcmiError, DcmiUnsupported
from collectors.dcmi.readings import (
    ChipId,
    ChipInfoReading,
    EccReading,
    HbmReading,
    MemoryReading,
    PcieReading,
    ProcessReading,
    from_json,
)
from collectors.npu_smi_info_records import InfoTable, NpuProcess
from collectors.npu_smi_mapping import MappingRow

__all__ = [
    "CHIP_PLANS",
    "NODE_PLANS",
    "SERVED",
    "Call",
    "NeedsIds",
    "chip_ids",
    "optional",
    "read_info",
    "read_mapping",
]

Call = Callable[..., Any]
UTILIZATION_TYPES = (1, 2, 3, 6, 10, 12, 13, 14)


class NeedsIds(Exception):
    """The library gives no card/device ids (v2 only): the info table and ``-m`` stay npu-smi's."""


def optional(call: Call, name: str, **args: Any) -> Any:
    """The call's value, or None when the chip or library does not support it."""
    try:
        return call(name, **args)
    except DcmiUnsupported:
        return None
    except DcmiError as exc:
        if exc.not_supported:
            return None
        raise


def _reading(cls: type, value: Any) -> Any:
    return None if value is None else from_json(cls, value)


def chip_ids(value: Any) -> tuple[ChipId, ...]:
    """The ``chips`` call's answer as ChipIds."""
    return tuple(from_json(ChipId, item) for item in value or ())


def _utilization(call: Call, logic: int, types: Sequence[int]) -> dict[int, int]:
    rates = {kind: optional(call, "utilization", chip=logic, input_type=kind) for kind in types}
    return {kind: value for kind, value in rates.items() if value is not None}


def read_health(call: Call, logic: int) -> list[Any]:
    return [records.health_record(call("health", chip=logic), call("error_codes", chip=logic))]


def read_usages(call: Call, logic: int) -> list[Any]:
    hbm = _reading(HbmReading, optional(call, "hbm", chip=logic))
    memory = _reading(MemoryReading, optional(call, "memory", chip=logic))
    return [records.usages_record(_utilization(call, logic, UTILIZATION_TYPES), hbm, memory)]


def read_common(call: Call, logic: int) -> list[Any]:
    frequencies = {kind: optional(call, "frequency", chip=logic, freq_type=kind)
                   for kind in (records.FREQ_AICORE_CURRENT, records.FREQ_AICORE_MAX)}
    return [records.common_record(
        {kind: value for kind, value in frequencies.items() if value is not None},
        temperature=call("temperature", chip=logic),
        power_tenths=call("power", chip=logic),
        chip_info=_reading(ChipInfoReading, optional(call, "chip_info", chip=logic)),
        utilization=_utilization(call, logic, (2, 6)),
    )]


def read_ecc(call: Call, logic: int) -> list[Any]:
    ddr = _reading(EccReading, optional(call, "ecc", chip=logic, memory="ddr"))
    hbm = _reading(EccReading, optional(call, "ecc", chip=logic, memory="hbm"))
    return [records.ecc_record(ddr, hbm)]


def read_memory(call: Call, logic: int) -> list[Any]:
    hbm = _reading(HbmReading, optional(call, "hbm", chip=logic))
    memory = _reading(MemoryReading, optional(call, "memory", chip=logic))
    return [records.memory_record(hbm, memory)]


def read_net_health(call: Call, logic: int) -> list[Any]:
    return [records.net_health_record(call("network_health", chip=logic))]


# source name -> plan for one chip (by logical id); what ``parse`` would return for that chip
CHIP_PLANS: dict[str, Callable[[Call, int], Any]] = {
    "npu_smi_health": read_health,
    "npu_smi_usages": read_usages,
    "npu_smi_common": read_common,
    "npu_smi_ecc": read_ecc,
    "npu_smi_memory": read_memory,
    "hccn_net_health": read_net_health,
}


def _with_ids(chips: Sequence[ChipId]) -> Sequence[ChipId]:
    if any(chip.card_id is None or chip.device_id is None for chip in chips):
        raise NeedsIds("the library lists chips without card/device ids (v2 only): npu-smi names them")
    return sorted(chips, key=lambda chip: (chip.card_id or 0, chip.device_id or 0))


def read_info(call: Call, chips: Sequence[ChipId]) -> tuple[InfoTable]:
    """The ``npu-smi info`` table: one row per chip, and the process rows when every chip answered them."""
    rows = []
    procs: list[NpuProcess] = []
    process_section = True
    for chip in _with_ids(chips):
        logic = chip.logic_id
        status = records.chip_status(
            chip,
            health=call("health", chip=logic),
            chip_info=_reading(ChipInfoReading, optional(call, "chip_info", chip=logic)),
            power_tenths=optional(call, "power", chip=logic),
            temperature=optional(call, "temperature", chip=logic),
            aicore_percent=optional(call, "utilization", chip=logic, input_type=2),
            hbm=_reading(HbmReading, optional(call, "hbm", chip=logic)),
            memory=_reading(MemoryReading, optional(call, "memory", chip=logic)),
            pcie=_reading(PcieReading, optional(call, "pcie", chip=logic)),
        )
        if status is not None:
            rows.append(status)
        found = optional(call, "processes", chip=logic)
        if found is None:
            process_section = False
        else:
            procs.extend(records.processes(chip, [from_json(ProcessReading, item) for item in found]))
    # version: npu-smi's banner; the library's own version is not the tool's, so it stays absent.
    return (InfoTable(version=None, chips=tuple(rows), processes=tuple(procs) if process_section else (),
                      process_section=process_section),)


def read_mapping(call: Call, chips: Sequence[ChipId]) -> RowTuple:
    """``npu-smi info -m``: NPU ID, Chip ID, logic id, physical id and the chip's name."""
    rows = []
    for chip in _with_ids(chips):
        info = _reading(ChipInfoReading, optional(call, "chip_info", chip=chip.logic_id))
        name = f"{info.chip_type} {info.chip_name}".strip() if info is not None else ""
        rows.append(MappingRow(npu=chip.card_id or 0, chip=chip.device_id or 0, logic_id=chip.logic_id,
                               phy_id=chip.phy_id, name=name, is_mcu=False))
    return RowTuple.of(rows, ())


# node-scope source name -> plan over the chip list
NODE_PLANS: dict[str, Callable[[Call, Sequence[ChipId]], Any]] = {
    "npu_smi_info": read_info,
    "npu_smi_mapping": read_mapping,
}
SERVED = frozenset(CHIP_PLANS) | frozenset(NODE_PLANS)
