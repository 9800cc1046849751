"""Shared vocabulary of every collector: samples, chip identities, parse errors.

A collector module pairs a pure parser (``parse(text) -> records``) with a pure
``samples(records, ...) -> list[Sample]`` mapper. The agent turns samples into
Prometheus metric families using the catalogue (``collectors.catalogue``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from collectors.fault_levels import ChipLevels

__all__ = [
    "ChipRef",
    "CollectContext",
    "NoData",
    "ParseError",
    "Sample",
    "Source",
    "ToolError",
    "label_pairs",
]

LabelPairs = tuple[tuple[str, str], ...]


def label_pairs(**labels: str | int) -> LabelPairs:
    """Labels in a stable, hashable form; callers keep the catalogue's label order."""
    return tuple((key, str(value)) for key, value in labels.items())


@dataclass(frozen=True)
class Sample:
    """One exported value. ``metric`` is the full exposed name (counters end in ``_total``)."""

    metric: str
    labels: LabelPairs
    value: float


@dataclass(frozen=True, order=True)
class ChipRef:
    """A chip as npu-smi addresses it: ``-i npu -c chip``.

    ``has_chip_id`` is False on layouts that print no chip id (950): per-chip
    calls then omit ``-c`` and the series carry ``chip="0"``.
    ``phy_id`` is the physical id hccn_tool's ``-i`` expects, when known.
    """

    npu: int
    chip: int
    has_chip_id: bool = True
    logic_id: int | None = None
    phy_id: int | None = None

    def labels(self) -> LabelPairs:
        return (("npu", str(self.npu)), ("chip", str(self.chip)))


_LINE_CLIP = 80


class ParseError(ValueError):
    """Tool output that could not be understood. Carries the offending line (clipped to 80 chars) when known."""

    def __init__(self, message: str, line_no: int | None = None, line: str | None = None) -> None:
        if line is not None and len(line) > _LINE_CLIP:
            line = line[: _LINE_CLIP - 3] + "..."  # a hostile tool's 4 MiB line must not become the message
        detail = message
        if line_no is not None:
            detail = f"{message} (line {line_no}: {line!r})"
        super().__init__(detail)
        self.line_no = line_no
        self.line = line


class ToolError(ParseError):
    """The tool printed an error message instead of data (e.g. ``Invalid card id.``)."""


class NoData(Exception):
    """Nothing to collect on this node (tool absent, no RoCE port): not an error."""


@dataclass(frozen=True)
class CollectContext:
    """What a ``samples`` mapper may know beyond its own output.

    ``inventory`` maps (npu, chip) to extra ``npu_info`` labels gathered by
    other sources (logic id, serial, firmware, driver). ``process_owner``
    resolves a pid to (process name, user) via psutil; it is only set when
    per-process metrics are enabled, as is ``process_usage``: a pid's (CPU seconds, start time, command line),
    None when it is gone or in another namespace. ``fault_levels`` judges a chip's active
    error codes (chip, health word, codes) with the agent's history of them
    (``agent.handling.levels.FaultLevels``); None: the packaged table alone, without history.
    ``inventory_chips`` is how many chips the node is known to have (``npu-smi info -m``,
    ``expected_chips``); 0: unknown.
    """

    inventory: Mapping[tuple[int, int], Mapping[str, str]] = field(default_factory=dict)
    per_process_metrics: bool = False
    process_owner: Callable[[int], tuple[str, str]] | None = None
    process_usage: Callable[[int], tuple[float, float, str] | None] | None = None
    fault_levels: Callable[[ChipRef, str | None, Sequence[str]], ChipLevels] | None = None
    inventory_chips: int = 0


@dataclass(frozen=True)
class Source:
    """One tool invocation the agent schedules.

    ``scope="chip"`` runs ``argv(chip)`` once per chip (through a small pool);
    ``scope="node"`` runs ``argv(None)`` once. ``parse`` is pure (text in,
    records out) and raises ``ParseError``/``ToolError``; ``samples`` maps the
    records (and the chip asked about) to catalogue samples.
    """

    name: str
    tool: str
    group: str
    scope: Literal["node", "chip"]
    argv: Callable[[ChipRef | None], list[str]]
    parse: Callable[[str], Sequence[Any]]
    samples: Callable[[Sequence[Any], ChipRef | None, CollectContext], list[Sample]]
    default_enabled: bool = True
