"""The records of the ``npu-smi info`` table: one per chip, one per process row, and the table."""

from __future__ import annotations

from dataclasses import dataclass

from collectors.bounds import Rejection

__all__ = ["ChipStatus", "InfoTable", "NpuProcess"]


@dataclass(frozen=True)
class ChipStatus:
    """One chip (die) of the device box. Absent values (``NA``, ``-``, out of range) are None."""

    npu: int
    chip: int
    has_chip_id: bool
    phy_id: int | None
    device_id: int | None
    name: str
    health: str
    bus_id: str | None
    power_watts: float | None
    temperature_celsius: float | None
    aicore_ratio: float | None
    hugepages_used: float | None
    hugepages_total: float | None
    memory_used_bytes: float | None
    memory_total_bytes: float | None
    hbm_used_bytes: float | None
    hbm_total_bytes: float | None


@dataclass(frozen=True)
class NpuProcess:
    """One row of the process box; ``name`` is empty for pids of another PID namespace."""

    npu: int
    chip: int
    pid: int
    name: str
    memory_bytes: float | None
    container_pid: int | None


@dataclass(frozen=True)
class InfoTable:
    """The parsed table. ``process_section`` tells "no processes" apart from "not printed".

    ``rejected`` lists the rows and values the parser refused (see ``collectors.npu_smi_info``);
    ``cut`` says why the table is not whole (a box left open at the end, a process box that skips
    NPUs of the chip box), None when it is.
    """

    version: str | None
    chips: tuple[ChipStatus, ...]
    processes: tuple[NpuProcess, ...]
    process_section: bool
    rejected: tuple[Rejection, ...] = ()
    cut: str | None = None
