"""Which chip a fault event's ``deviceid`` names (``agent.dcmi.event_chips``): logical and physical ids that
overlap, as on a real 910B node (logical 0-7 against a permutation of physical 0-7), settled by asking which
chip lists the raised code."""

from __future__ import annotations

from collections.abc import Iterable

import pytest

from agent.dcmi.event_chips import LOGICAL, PHYSICAL, ChipIds, EventChips
from collectors.base import ChipRef

# chip i: logical (i + 3) % 8, physical i (the fake library's default order)
CHIPS = [ChipIds(ChipRef(i, 0), (i + 3) % 8, i) for i in range(8)]
CODE = "80818C00"


def _by_logic(logic: int) -> ChipRef:
    return next(c.chip for c in CHIPS if c.logic_id == logic)


def _by_phy(phy: int) -> ChipRef:
    return next(c.chip for c in CHIPS if c.phy_id == phy)


class Library:
    """The error codes each logical id lists; ``asked`` what was asked."""

    def __init__(self, listed: dict[int, set[str]], fail: bool = False) -> None:
        self.listed = listed
        self.fail = fail
        self.asked: list[int] = []

    def __call__(self, logic: int) -> Iterable[str]:
        self.asked.append(logic)
        if self.fail:
            raise OSError("helper down")
        return self.listed.get(logic, set())


def test_an_event_naming_its_chip_by_physical_id_lands_on_that_chip_when_the_ids_overlap() -> None:
    # NPU 2's fault (card 2: logical 5, physical 2); "2" is also card 7's logical id
    library = Library({5: {CODE}})
    chips = EventChips(lambda: CHIPS, library)
    assert chips.chip(2, CODE) == ChipRef(2, 0) != _by_logic(2)
    assert chips.naming == PHYSICAL
    assert chips.chip(2) == ChipRef(2, 0)  # its recovery (no code to ask about) follows what was learned
    assert chips.chip(6, "80E01801") == _by_phy(6)  # settled: no more questions
    assert library.asked == [2, 5]


def test_an_event_naming_its_chip_by_logical_id_lands_on_that_chip_when_the_ids_overlap() -> None:
    library = Library({2: {CODE}})
    chips = EventChips(lambda: CHIPS, library)
    assert chips.chip(2, CODE) == _by_logic(2) == ChipRef(7, 0)
    assert chips.naming == LOGICAL


@pytest.mark.parametrize("library", [Library({}), Library({2: {CODE}, 5: {CODE}}), Library({}, fail=True)])
def test_when_the_library_cannot_tell_the_event_is_read_as_the_device_plugin_reads_it(library: Library) -> None:
    chips = EventChips(lambda: CHIPS, library)
    assert chips.chip(2, CODE) == _by_logic(2)
    assert chips.naming is None  # still open: the next raised event asks again


def test_ids_that_do_not_overlap_say_which_they_are_without_asking() -> None:
    apart = [ChipIds(ChipRef(i, 0), (i + 3) % 8, i + 32) for i in range(8)]
    library = Library({})
    chips = EventChips(lambda: apart, library)
    assert chips.chip(36, CODE) == ChipRef(4, 0) and chips.naming == PHYSICAL
    assert chips.chip(99, CODE) is None
    assert library.asked == []


def test_a_chip_whose_two_ids_are_equal_needs_no_question() -> None:
    same = [ChipIds(ChipRef(i, 0), i, i) for i in range(8)]
    library = Library({})
    assert EventChips(lambda: same, library).chip(3, CODE) == ChipRef(3, 0)
    assert library.asked == []
