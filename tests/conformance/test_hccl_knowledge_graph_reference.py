"""collectors.hccl.knowledge still agrees with ascend-faultdiag's kg-config.json in the shared reference.

Every ``AISW_CANN_HCCL_*`` entity of the file is in the table with the same phrasings (``regex.in``:
a flat list is one alternative, a list of lists several), and the table has no entity the file lacks.
Skips where the reference is not beside the repository (``$NPUWATCH_REFERENCE`` names another place).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from collectors.hccl.knowledge import KNOWLEDGE

REFERENCE = Path(os.environ.get("NPUWATCH_REFERENCE")
                 or Path(__file__).resolve().parents[3] / "shared" / "reference")
KG_FILE = REFERENCE / "faults" / "kg-config.json"


def _alternatives(regex_in: list[Any]) -> tuple[tuple[str, ...], ...]:
    if regex_in and all(isinstance(part, list) for part in regex_in):
        return tuple(tuple(alternative) for alternative in regex_in)
    return (tuple(regex_in),)


@pytest.fixture(scope="module")
def hccl_entities() -> dict[str, Any]:
    if not KG_FILE.is_file():
        pytest.skip(f"no knowledge graph at {KG_FILE}")
    repository = json.loads(KG_FILE.read_text(encoding="utf-8"))["knowledge-repository"]
    return {name: entity for name, entity in repository.items() if name.startswith("AISW_CANN_HCCL_")}


def test_the_table_has_exactly_the_files_hccl_entities(hccl_entities: dict[str, Any]) -> None:
    assert sorted(entry.entity for entry in KNOWLEDGE) == sorted(hccl_entities)


def test_each_entity_has_the_files_phrasings(hccl_entities: dict[str, Any]) -> None:
    differ = [entry.entity for entry in KNOWLEDGE
              if entry.phrasings != _alternatives(hccl_entities[entry.entity]["regex"]["in"])]
    assert differ == []
