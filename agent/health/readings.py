"""The records a node reading fills: one tool call's ``Reading``, the chips' and ports' readings, the log scan.

Nothing here runs a tool or judges: readers fill these records, the checks of ``npuwatch check`` and
``npuwatch diagnose`` judge them.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from collectors.base import ChipRef
from collectors.hccl.classify import Event

__all__ = ["LogScan", "NodeReadings", "QuickReadings", "Reading", "RoceReadings"]


@dataclass(frozen=True)
class Reading:
    """One tool call: the parsed record, or why there is none; ``at`` is when it finished; ``by`` who
    answered (``tool``, or the record backend's name: ``dcmi``)."""

    value: Any = None
    error: str | None = None
    at: float = 0.0
    by: str = "tool"

    @property
    def ok(self) -> bool:
        return self.error is None


@dataclass
class LogScan:
    """Errors the recent logs hold: counted incidents and the culprit hints near them."""

    window_s: float
    roots: list[str]
    roots_exist: bool = False  # any configured root (directory, glob base, kernel log) exists
    missing_roots: list[str] = field(default_factory=list)  # configured directories that do not exist
    files: int = 0  # files read
    older_files: int = 0  # files found but not written within the window (not read)
    bytes_read: int = 0
    events: list[Event] = field(default_factory=list)
    hints: Counter[tuple[str, str]] = field(default_factory=Counter)
    errors: list[str] = field(default_factory=list)
    # The records triage reads of the same files (an agent.triage.evidence.Evidence), when the scan
    # was read with triage's log reader; None otherwise. Typed loosely: triage sits above this package.
    evidence: Any = None

    def by_category(self) -> Counter[str]:
        return Counter(event.category for event in self.events)

    def by_code(self) -> Counter[str]:
        return Counter(event.code for event in self.events)


@dataclass
class RoceReadings:
    link: Reading
    link_stat: Reading
    net_health: Reading
    ip: Reading
    optical: list[Reading]  # first and second sample
    stat: list[Reading]


@dataclass
class NodeReadings:
    """Everything diagnose read; ``table`` is an error Reading when npu-smi could not list chips."""

    table: Reading
    chips: list[ChipRef] = field(default_factory=list)
    health: dict[ChipRef, Reading] = field(default_factory=dict)
    ecc: dict[ChipRef, Reading] = field(default_factory=dict)
    roce: dict[ChipRef, RoceReadings] = field(default_factory=dict)
    logs: LogScan | None = None
    node: str = "this node"  # how the shared fault records name this node
    # code -> since, per chip: the ManuallySeparateNPU levels the agent's history holds (agent.handling)
    held: dict[ChipRef, dict[str, float]] = field(default_factory=dict)
    # each chip's escalation marks in the agent's fault history (agent.handling.escalation.ChipHistory), and
    # whether there was a history to read
    histories: dict[ChipRef, Any] = field(default_factory=dict)
    history_note: str = ""

    def multi_chip(self) -> bool:
        return any(ref.chip != 0 for ref in self.chips)

    def label(self, ref: ChipRef) -> str:
        return f"NPU {ref.npu} chip {ref.chip}" if self.multi_chip() else f"NPU {ref.npu}"


@dataclass
class QuickReadings:
    node: NodeReadings
    boards: dict[int, Reading] = field(default_factory=dict)  # npu -> -t board (card level)
    hccs: dict[ChipRef, Reading] = field(default_factory=dict)
    agent: Any = None  # agent.check.local_agent.AgentReading
    read_s: float = 0.0
