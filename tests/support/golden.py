"""Golden files of the npu-smi table parsers: the expected records of each fixture, as JSON beside it.

Tests only compare. After a deliberate parser change, regenerate with
``python -m tests.support.golden`` and review the diff like any other change; a test run never writes them.
"""

from __future__ import annotations

import dataclasses
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from collectors import npu_smi_info, npu_smi_list, npu_smi_mapping, npu_smi_topo
from tests.support import paths

FIXTURES = paths.FIXTURES / "npu_smi_tables"

# The fixture name's first word (before "_") picks its parser.
PARSERS: dict[str, Callable[[str], Any]] = {
    "info": npu_smi_info.parse,
    "mapping": npu_smi_mapping.parse,
    "list": npu_smi_list.parse,
    "topo": npu_smi_topo.parse,
}


def cases(kinds: set[str] | None = None) -> list[Path]:
    return sorted(path for path in FIXTURES.glob("*.txt") if kinds is None or path.stem.split("_")[0] in kinds)


def as_json(records: Any) -> Any:
    if dataclasses.is_dataclass(records) and not isinstance(records, type):
        return json.loads(json.dumps(dataclasses.asdict(records)))
    return json.loads(json.dumps([dataclasses.asdict(record) for record in records]))


def parsed(case: Path) -> Any:
    return as_json(PARSERS[case.stem.split("_")[0]](case.read_text()))


def expected(case: Path) -> Any:
    return json.loads(case.with_suffix(".json").read_text())


def write_if_changed(path: Path, text: str, changed: list[Path]) -> None:
    """Write a golden file when its text differs, and note it in ``changed`` (the regenerators' one path)."""
    if not path.exists() or path.read_text(encoding="utf-8") != text:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        changed.append(path)


def report_rewritten(changed: list[Path]) -> None:
    for path in changed:
        print(f"rewrote {path}", file=sys.stderr)


def regenerate() -> list[Path]:
    """Rewrite every golden file from the current parsers; returns those whose content changed."""
    changed: list[Path] = []
    for case in cases():
        write_if_changed(case.with_suffix(".json"), json.dumps(parsed(case), indent=2, sort_keys=True) + "\n",
                         changed)
    return changed


if __name__ == "__main__":
    report_rewritten(regenerate())
