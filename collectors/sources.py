"""The registry of tool-backed sources, and the cross-source facts the agent needs.

``SOURCES`` is an explicit tuple (no import side effects): one entry per tool
invocation. ``chip_refs`` and ``inventory`` read other sources' latest records
from the snapshot store, so per-chip calls and ``npu_info`` labels stay current.
"""

from __future__ import annotations

import importlib
from typing import Any, Protocol

import psutil

from collectors.base import ChipRef, Source

__all__ = ["SOURCES", "SOURCE_MODULES", "RecordStore", "chip_refs", "chips_from", "inventory", "process_owner",
           "process_usage"]


class RecordStore(Protocol):
    """Where the latest parsed records of each source are kept (the agent's snapshot store)."""

    def records(self, source: str) -> Any: ...

    def get(self, source: str) -> Any:
        """The source's latest snapshot (``started_at``, ``ok``, ``no_data``, ``down_reason``, ``records``), None
        when not registered."""

SOURCE_MODULES: tuple[str, ...] = (
    "npu_smi_mapping",
    "npu_smi_topo",
    "npu_smi_info",
    "npu_smi_usages",
    "npu_smi_common",
    "npu_smi_ecc",
    "npu_smi_health",
    "npu_smi_memory",
    "npu_smi_board",
    "npu_smi_hccs",
    "npu_smi_hccs_bw",
    "hccn_link",
    "hccn_link_stat",
    "hccn_net_health",
    "hccn_optical",
    "hccn_stat",
    "hccn_speed",
    "hccn_ip",
    "ascend_dmi",
)


def _load_sources() -> tuple[Source, ...]:
    found: list[Source] = []
    for name in SOURCE_MODULES:
        module = importlib.import_module(f"collectors.{name}")
        for attr in ("SOURCE", "SOURCES"):
            value = getattr(module, attr, None)
            if isinstance(value, Source):
                found.append(value)
            elif isinstance(value, (tuple, list)):
                found.extend(item for item in value if isinstance(item, Source))
    return tuple(found)


SOURCES: tuple[Source, ...] = _load_sources()


def chip_refs(store: RecordStore) -> list[ChipRef]:
    """Chips from the latest info table, with logic/physical ids from ``npu-smi info -m``."""
    return chips_from(store.records("npu_smi_info"), store.records("npu_smi_mapping"))


def chips_from(table: Any, mapping: Any = None) -> list[ChipRef]:
    """The one chip list of the agent and every command (check, diagnose, bundle): the chips of ``npu-smi
    info``'s table (an ``InfoTable``, or its Source's one-element sequence as the store and DCMI hold it),
    with the logic/physical ids of ``info -m``'s rows when they are at hand (None: the table's ids alone)."""
    from collectors import npu_smi_info

    table = _unwrap(table)
    if table is None:
        return []
    return list(npu_smi_info.chip_refs(table, mapping))


def _unwrap(records: Any) -> Any:
    """Node-scope sources store ``parse()``'s one-element sequence; the record is inside."""
    if isinstance(records, (list, tuple)) and len(records) == 1:
        return records[0]
    return records


def inventory(store: RecordStore) -> dict[tuple[int, int], dict[str, str]]:
    """Extra ``npu_info`` labels per chip: logic id from ``-m``, firmware/driver/serial from board.

    ``npu_info`` must not appear with empty firmware/driver/serial and then change (a new
    series): while ``-t board`` has not answered for a chip yet, the entry under
    ``npu_smi_info.EVERY_CHIP`` says ``BOARD_PENDING`` and that chip's ``npu_info`` waits. Board
    facts are known once the board source answered for the chip (its last good answer is kept
    even when stale: board facts do not change while the agent runs), and known to be
    unavailable when the source is disabled or its last run failed.
    """
    from collectors import npu_smi_board, npu_smi_info, npu_smi_mapping

    facts: dict[tuple[int, int], dict[str, str]] = {}
    mapping = store.records("npu_smi_mapping")
    if mapping:
        for key, labels in npu_smi_mapping.inventory(mapping).items():
            facts.setdefault(key, {}).update(labels)
    board_snapshot = store.get("npu_smi_board")
    if board_snapshot is None:
        return facts  # board disabled: npu_info never waits for it
    boards: Any = board_snapshot.records
    if boards:
        for chip, record in boards.items():
            if chip is None:
                continue
            board = record[0] if isinstance(record, (list, tuple)) and record else record
            labels = npu_smi_board.inventory_labels(board)
            chip_facts = facts.setdefault((chip.npu, chip.chip), {})
            chip_facts.update({k: v for k, v in labels.items() if v})
            chip_facts[npu_smi_info.BOARD_ANSWERED] = "1"
    # No npu-smi where DCMI serves the chips (down reason no_data): board facts are unavailable, as when it failed.
    unavailable = board_snapshot.no_data and getattr(board_snapshot, "down_reason", None) == "no_data"
    failed = board_snapshot.started_at is not None and not board_snapshot.ok and (
        not board_snapshot.no_data or unavailable)
    if not failed:  # not run yet, no chips to ask yet, or a chip it has not been asked about
        facts[npu_smi_info.EVERY_CHIP] = {npu_smi_info.BOARD_PENDING: "1"}
    return facts


def mapped_chips(store: RecordStore) -> int:
    """How many chips (not MCUs) the last ``npu-smi info -m`` listed; 0 when it has not answered."""
    from collectors import npu_smi_mapping

    mapping = store.records("npu_smi_mapping")
    return len(npu_smi_mapping.inventory(mapping)) if mapping else 0


def process_owner(pid: int) -> tuple[str, str]:
    """(process name, user) of a host pid; empty strings when it is gone or in another namespace."""
    try:
        process = psutil.Process(pid)
        with process.oneshot():
            return process.name(), process.username()
    except (psutil.Error, OSError, KeyError):
        return "", ""


def process_usage(pid: int) -> tuple[float, float, str] | None:
    """(CPU seconds in user and system mode, start time, command line) of a host pid; None when it is gone or in
    another namespace."""
    try:
        process = psutil.Process(pid)
        with process.oneshot():
            cpu = process.cpu_times()
            return cpu.user + cpu.system, process.create_time(), " ".join(process.cmdline())
    except (psutil.Error, OSError):
        return None
