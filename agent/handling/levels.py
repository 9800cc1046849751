"""The agent's judge of error codes (``CollectContext.fault_levels``): the configured table, each chip's
history in the state file, the clock."""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from agent.handling.escalation import ChipHistory, step
from agent.handling.history import STATE_FILE, FaultHistory, chip_key
from collectors.base import ChipRef
from collectors.fault_levels import ChipLevels, FaultTable, configured_table

if TYPE_CHECKING:
    from agent.core.config import Config

__all__ = ["FaultLevels", "history_of", "table_of", "table_warnings"]

log = logging.getLogger(__name__)


def table_of(config: Config) -> FaultTable:
    """The table ``faults.codes_file`` and ``faults.escalation_file`` name (a file that cannot be loaded is logged
    as an error, each skipped rule as a warning)."""
    table, problem = configured_table(config.faults.codes_file, config.faults.escalation_file)
    if problem is not None:
        log.error("%s", problem)
    for entry in table.skipped:
        log.warning("fault table: %s", entry)
    return table


def table_warnings(config: Config) -> list[str]:
    """What ``npuwatch check-config`` says about the fault table files: a file that cannot be read (its packaged
    copy is used) and each rule, list or code that is skipped (the rest of its file is used)."""
    table, problem = configured_table(config.faults.codes_file, config.faults.escalation_file)
    return ([problem] if problem is not None else []) + [f"fault table: {entry}" for entry in table.skipped]


def history_of(config: Config) -> FaultHistory:
    return FaultHistory(Path(os.path.expanduser(config.state_dir)) / STATE_FILE)


class FaultLevels:
    def __init__(self, table: FaultTable, history: FaultHistory, clock: Callable[[], float] = time.time) -> None:
        self.table = table
        self.history = history
        self._clock = clock

    def __call__(self, chip: ChipRef, health: str | None, codes: Sequence[str], *, exact: bool = False,
                 at: float | None = None) -> ChipLevels:
        """The chip's levels now that it reports ``codes`` (``exact``: reported as they changed, see ``step``;
        ``at``: when they changed, if before now: a fault event judged at the time it was received)."""
        key = chip_key(chip.npu, chip.chip)
        now = self._clock() if at is None else min(at, self._clock())
        judged: list[ChipLevels] = []

        def change(chips: dict[str, ChipHistory]) -> dict[str, ChipHistory]:
            after, levels = step(self.table, chips.get(key, ChipHistory()), health, codes, now, exact=exact)
            judged.append(levels)
            chips[key] = after
            return chips

        self.history.update(change)
        return judged[0]
