"""Every HCCL fault of the knowledge graph (collectors.hccl.knowledge) is classified into its category.

A line is built from each alternative phrasing (its substrings joined by a filler, as HCCL fills in
an address, a rank or a return code) and wrapped the ways logs carry it: a plog ``[ERROR]`` line,
the same under a torchrun ``[rankN]:`` and a Ray ``(Worker pid=N)`` prefix (HCCL prints these faults
at ERROR level; a line of another level needs one of the classifier's own tokens to be read at all).
"""

from __future__ import annotations

import pytest

from collectors.hccl.codes import CATEGORIES
from collectors.hccl.knowledge import KNOWLEDGE, KnowledgeEntry, match_knowledge
from collectors.hccl.rules import analyse_line, classify_line

PLOG = "[ERROR] HCCL(3069,python3):2026-12-01-10:11:12.345.678 [transport_roce.cc:512][3069]"
WRAPPERS = {
    "plog": PLOG + "{}",
    "torchrun": "[rank3]: " + PLOG + "{}",
    "ray": "(RayTrainWorker pid=4711) " + PLOG + "{}",
}
CASES = [(entry, index, phrasing) for entry in KNOWLEDGE for index, phrasing in enumerate(entry.phrasings)]


def built(phrasing: tuple[str, ...]) -> str:
    return " 7 ".join(phrasing)


def categories(line: str) -> set[str]:
    result = classify_line(line, None)
    assert result is not None, line
    return {category for _code, category in result.matches}


def test_every_entry_maps_to_a_category_we_count() -> None:
    known = {category.name for category in CATEGORIES}
    assert len({entry.entity for entry in KNOWLEDGE}) == len(KNOWLEDGE) == 32
    for entry in KNOWLEDGE:
        assert entry.category in known and entry.category != "other", entry.entity
        assert entry.phrasings and all(entry.phrasings), entry.entity


@pytest.mark.parametrize("wrapper", sorted(WRAPPERS))
@pytest.mark.parametrize(("entry", "index", "phrasing"), CASES,
                         ids=[f"{entry.entity}-{index}" for entry, index, _ in CASES])
def test_each_phrasing_is_its_entrys_category(entry: KnowledgeEntry, index: int, phrasing: tuple[str, ...],
                                              wrapper: str) -> None:
    line = WRAPPERS[wrapper].format(built(phrasing))
    assert categories(line) == {entry.category}, line
    result = analyse_line(line, None)
    assert result is not None and not result.provisional, line


def test_a_phrasing_with_a_part_missing_is_not_that_entry() -> None:
    entry = next(e for e in KNOWLEDGE if e.entity == "AISW_CANN_HCCL_001")
    first, *rest = entry.phrasings[0]
    assert match_knowledge(" 7 ".join(rest)) is None
    assert match_knowledge(" 7 ".join([first, *rest])) is entry


@pytest.mark.parametrize("line", [
    # 2023: HCCL's heartbeat thread, retransmissions exhausted
    PLOG + "[Heartbeat]cqe err status[12], remote ip[10.0.3.7]",
    PLOG + "[Heartbeat]cqe error status[12]",
    # the driver's and the newer HCCL's wording of the same completion error
    PLOG + "[RoCE] error cqe, status=12, qpn=1031",
    "[rank5]: EI0013: [PID: 3069] 2026-12-01-10:11:12.345.678 RDMA CQE error, remote rank 13",
])
def test_old_and_new_phrasings_of_a_roce_completion_error_are_roce_cqe(line: str) -> None:
    assert categories(line) == {"roce_cqe"}


def test_an_error_line_no_rule_knows_stays_other_with_its_place() -> None:
    line = PLOG + "[Link][Probe]something unheard of went wrong"
    result = analyse_line(line, None)
    assert result is not None and result.provisional
    assert result.matches == (("hccl:transport_roce", "other"),)
