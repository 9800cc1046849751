"""The packaged CANN error table (collectors/fault_data/cann_errors.json) is what scripts/gen_cann_errors.py makes
from the reference catalogue (../shared/reference/cann_errors), and every code and number the catalogue
publishes is in it with a class.

Skips where the reference is not beside the repository (``$NPUWATCH_REFERENCE`` names another place).
"""

from __future__ import annotations

import csv
import os
from pathlib import Path

import pytest

from collectors.hccl import errtable
from collectors.hccl.errtable_build import build, render

REFERENCE = Path(os.environ.get("NPUWATCH_REFERENCE")
                 or Path(__file__).resolve().parents[3] / "shared" / "reference") / "cann_errors"


@pytest.fixture(scope="module")
def reference() -> Path:
    if not (REFERENCE / "cann_error_codes.csv").is_file():
        pytest.skip(f"no reference catalogue at {REFERENCE}")
    return REFERENCE


def _column(reference: Path, name: str, column: str) -> list[str]:
    with (reference / name).open(encoding="utf-8", newline="") as handle:
        return [row[column] for row in csv.DictReader(handle)]


def test_the_checked_in_table_is_what_the_generator_makes(reference: Path) -> None:
    made = render(build(reference))
    assert errtable.TABLE_FILE.read_text(encoding="utf-8") == made, (
        "collectors/fault_data/cann_errors.json drifted from the reference: run python scripts/gen_cann_errors.py")


def test_every_published_code_and_number_is_in_the_table(reference: Path) -> None:
    table = errtable.table()
    assert set(_column(reference, "cann_error_codes.csv", "code")) <= set(table["cann"])
    assert {c for c in _column(reference, "acl_error_codes.csv", "code") if c != "0"} == set(table["acl"])
    assert {c.lower() for c in _column(reference, "ts_error_codes.csv", "ts_code_hex") if c != "0x0"} == set(
        table["ts"])
    assert {c.lower() for c in _column(reference, "runtime_inner_errors.csv", "inner_code_hex")} == set(
        table["inner"])
    els = {c for c in _column(reference, "driver_error_codes.csv", "el_code_via_halMapErrorCode") if c != "EL0000"}
    assert els <= set(table["cann"])
    assert set(_column(reference, "aicpu_errcodes.csv", "errcode")) == set(table["aicpu"])
    assert {c for c in _column(reference, "hccl_result.csv", "code") if c != "0"} == set(table["hccl_result"])
    torch = {c for c in _column(reference, "torch_npu_err_codes.csv", "code") if not c.endswith("000")}
    assert torch == set(table["torch_npu"])
    assert [p for p, *_ in table["phrases"]] == _column(reference, "log_phrases.csv", "phrase")


def test_the_table_records_where_it_came_from(reference: Path) -> None:
    provenance = errtable.table()["provenance"]
    assert {"runtime", "ge", "opbase", "driver", "hcomm", "hccl", "pytorch"} <= {s["id"] for s in provenance["sources"]}
    assert set(provenance["sha256"]) >= {"README.md", "cann_error_codes.csv", "acl_error_codes.csv"}
