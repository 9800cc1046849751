"""A second way to read a source: what the collection and the node readers ask of it.

A ``RecordReader`` returns, for a source and a chip, the records the source's own parser would
return from its tool's output, so the source's ``samples`` builder serves either way and a sample
does not depend on who read it. When it cannot read one (the library lacks the function, its
helper hung or died, the chip refused), it raises ``Fallback`` and the tool serves that reading.
``agent.dcmi.backend.DcmiBackend`` is the one implementation (docs/dcmi.md).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

from collectors.base import ChipRef, Source

__all__ = ["TOOL", "Fallback", "RecordReader"]

TOOL = "tool"  # the name of the tool path in ``RecordReader.ran``'s counts


class Fallback(Exception):
    """This reading is the tool's to serve. ``reason`` is the collector error reason it would be
    (``timeout``, ``exit``, ``parse``) if the tool cannot serve it either. ``helper``: the backend itself
    failed (its helper hung, died, is busy or waiting out a backoff), not this one reading: a one-off
    command stops asking it."""

    def __init__(self, reason: str, message: str, *, helper: bool = False) -> None:
        super().__init__(message)
        self.reason = reason
        self.helper = helper


class RecordReader(Protocol):
    name: str  # "dcmi": a backend label value

    def serves(self, source: Source) -> bool:
        """Whether it reads this source at all (otherwise the tool always does)."""
        ...

    def active(self) -> bool:
        """Whether it is serving now: a missing tool is then not a fault for the sources it does not serve."""
        ...

    def read(self, source: Source, chip: ChipRef | None) -> Any:
        """What ``source.parse`` would return for ``chip``'s output; raises ``Fallback``."""
        ...

    def ran(self, source: str, counts: Mapping[str, int]) -> None:
        """One collection of ``source`` ended: readings served by each backend (its name, or ``TOOL``)."""
        ...
