"""Ending a chip fault without erasing what it did to the hardware counters.

Real counters keep their history: an ECC aggregate total, an HCCS or RoCE error counter, the
driver's link-up count and its link change records only grow. The fake tools compute a fault's
contribution from its ``since``, so when a fault ends (cleared, or replaced by new parameters)
its contribution up to that moment is folded into ``DemoState.carried``, and the link gets an
UP record when the fault was what held it down.
"""

from __future__ import annotations

from typing import Any

from agent.demo.render_model import LINK_UP, MAX_LINK_RECORDS, episode_counts, flap_state, link_episode
from agent.demo.state import DemoState

__all__ = ["end_chip_fault"]


def end_chip_fault(state: DemoState, chip: int, name: str, at: float) -> None:
    """Switch fault ``name`` off on ``chip`` at demo time ``at``, carrying what it counted."""
    faults = state.chip_faults.get(str(chip), {})
    params = faults.get(name)
    if params is None:
        return
    was_up = flap_state(state, chip, at).up
    del faults[name]
    if not faults:
        state.chip_faults.pop(str(chip), None)
    comes_up = flap_state(state, chip, at).up

    carried: dict[str, Any] = state.carried.setdefault(str(chip), {})
    counters: dict[str, float] = carried.setdefault("counters", {})
    for key, value in episode_counts(name, params, at).items():
        counters[key] = counters.get(key, 0.0) + value

    records = [[at_, event] for at_, event in carried.get("link_records", [])]
    ups = int(carried.get("link_ups", 0))
    episode = link_episode(name, params, at)
    if episode is not None:
        records += [[change_at, event] for change_at, event in episode[0] if change_at <= at]
        ups += episode[1]
    if not was_up and comes_up:
        records.append([at, LINK_UP])
        ups += 1
    if records:
        records.sort(key=lambda record: float(record[0]))
        carried["link_records"] = records[-MAX_LINK_RECORDS:]
    if ups:
        carried["link_ups"] = ups
