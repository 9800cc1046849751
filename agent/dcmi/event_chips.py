"""Which chip a fault event names (docs/dcmi.md, "Fault events").

An event's ``deviceid`` is read as the chip's logical id by the MindCluster device plugin, but a
library may name the chip by its physical id. Where the two id spaces are apart (a 910B node's
physical ids 0-7 against a container's renumbered logical ids, or the other way round), the id itself
says which it is. Where they overlap and differ (logical 0-7 mapped to a permutation of physical
0-7), the same number names two chips; reading it the wrong way puts the fault on another NPU. The
library is then asked: a raised code is in its chip's error-code list, so the first raised event that
names two candidate chips, of which exactly one lists the code, settles which id this library's events
carry, for the rest of this agent's life. Until it is settled, an event that names two chips is read as
the device plugin reads it (logical).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from collectors.base import ChipRef

__all__ = ["LOGICAL", "PHYSICAL", "ChipIds", "EventChips"]

log = logging.getLogger(__name__)

LOGICAL, PHYSICAL = "logical", "physical"


@dataclass(frozen=True)
class ChipIds:
    """One chip and both of its ids (either may be unknown)."""

    chip: ChipRef
    logic_id: int | None
    phy_id: int | None


# the chip's logical id -> its error codes as upper-case hex; raises when the library cannot say
CodesOf = Callable[[int], Iterable[str]]


class EventChips:
    """Resolves an event's ``deviceid`` to a chip; learns which id the library's events carry."""

    def __init__(self, chips: Callable[[], list[ChipIds]], codes_of: CodesOf | None = None) -> None:
        self._chips = chips
        self._codes_of = codes_of
        self._lock = threading.Lock()
        self.naming: str | None = None  # LOGICAL or PHYSICAL once the library showed which

    def _learn(self, naming: str, why: str) -> None:
        with self._lock:
            if self.naming is None:
                self.naming = naming
                log.info("DCMI fault events name their chip by its %s id (%s)", naming, why)

    def chip(self, deviceid: int, code: str | None = None) -> ChipRef | None:
        """The chip ``deviceid`` names; ``code``: the code of a raised event (it lets the library decide)."""
        chips = self._chips()
        by_logic = next((c for c in chips if c.logic_id == deviceid), None)
        by_phy = next((c for c in chips if c.phy_id == deviceid), None)
        if by_logic is None or by_phy is None or by_logic.chip == by_phy.chip:
            found = by_logic or by_phy
            if found is not None and (by_logic is None) != (by_phy is None) and _both_known(chips):
                only = LOGICAL if by_phy is None else PHYSICAL
                self._learn(only, f"{deviceid} is only a {only} id")
            return found.chip if found is not None else None
        naming = self.naming
        if naming is None and code is not None:
            naming = self._ask(by_logic, by_phy, code)
        return by_phy.chip if naming == PHYSICAL else by_logic.chip

    def _ask(self, by_logic: ChipIds, by_phy: ChipIds, code: str) -> str | None:
        """Which of the two chips lists ``code`` (the naming it shows), or None when the library cannot tell."""
        if self._codes_of is None or by_logic.logic_id is None or by_phy.logic_id is None:
            return None
        try:
            on_logic = code in {c.upper() for c in self._codes_of(by_logic.logic_id)}
            on_phy = code in {c.upper() for c in self._codes_of(by_phy.logic_id)}
        except Exception as exc:  # a helper that fails here only leaves the question open
            log.debug("DCMI: cannot read error codes to place an event: %s", exc)
            return None
        if on_logic == on_phy:
            return None
        naming = LOGICAL if on_logic else PHYSICAL
        self._learn(naming, f"code {code} is listed by the chip whose {naming} id the event carried")
        return naming


def _both_known(chips: list[ChipIds]) -> bool:
    """Every chip's logical and physical id are known (else a missing id proves nothing)."""
    return bool(chips) and all(c.logic_id is not None and c.phy_id is not None for c in chips)
