"""``npu-smi info -t health`` / ``-t ecc``: golden records and samples."""

from __future__ import annotations

from collectors.base import ChipRef, CollectContext
from collectors.npu_smi_ecc import EccCounts, EccRecord
from collectors.npu_smi_ecc import parse as parse_ecc
from collectors.npu_smi_ecc import samples as ecc_samples
from collectors.npu_smi_health import HealthRecord, parse, samples
from tests.support import paths

FIXTURES = paths.FIXTURES / "npu_smi_kv"
CHIP = ChipRef(2, 0)


def read(name: str) -> str:
    return (FIXTURES / name).read_text()


def test_health_golden_warning_with_codes_and_continuations() -> None:
    assert parse(read("health_warning_continuations.txt")) == HealthRecord(
        health="Warning",
        error_codes=("80E18402", "80CB8009"),
        error_information=(
            "node type=HBM, sensor type=Memory, event state=correctable ECC at 12:00:01\n"
            "node type=TS, sensor type=Software, event state=op timeout"
        ),
    )


def test_health_ok_with_na_codes_and_health_status_key() -> None:
    assert parse(read("health_ok_na.txt")) == HealthRecord(health="OK")


def test_health_codes_drop_junk_and_duplicates() -> None:
    record = parse("Health : Critical\nError Code : 8C03A000 NA 8C03A000 not-a-code 0x1F\n")
    assert record.error_codes == ("8C03A000", "0x1F")


def test_health_samples_one_series_per_code_and_none_when_ok() -> None:
    out = samples([parse(read("health_warning_continuations.txt"))], CHIP, CollectContext())
    assert [(s.metric, s.labels, s.value) for s in out] == [
        ("npu_error_code_active", (("npu", "2"), ("chip", "0"), ("code", "80E18402"), ("handling", "SeparateNPU")),
         1.0),
        ("npu_error_code_active", (("npu", "2"), ("chip", "0"), ("code", "80CB8009"), ("handling", "RestartRequest")),
         1.0),
        ("npu_fault_handling", (("npu", "2"), ("chip", "0"), ("handling", "SeparateNPU")), 1.0),
    ]
    assert samples(parse(read("health_ok_na.txt")), CHIP, CollectContext()) == []


def test_ecc_golden_950_hbm_only_with_next_isolated_and_no_space_colon() -> None:
    assert parse_ecc(read("ecc_950_hbm_next_isolated.txt")) == EccRecord(
        ddr=EccCounts(),
        hbm=EccCounts(
            single_bit_errors=12.0, double_bit_errors=1.0,
            single_bit_total_errors=340.0, double_bit_total_errors=2.0,
            single_bit_isolated_pages=4.0, double_bit_isolated_pages=3.0,
            single_bit_next_isolated_pages=0.0, double_bit_next_isolated_pages=0.0,
        ),
    )


def test_ecc_samples_hbm_only_with_bit_label() -> None:
    out = ecc_samples([parse_ecc(read("ecc_950_hbm_next_isolated.txt"))], CHIP, CollectContext())
    got = {(s.metric, dict(s.labels)["bit"]): s.value for s in out}
    assert got == {
        ("npu_hbm_ecc_current_errors", "single"): 12.0,
        ("npu_hbm_ecc_current_errors", "double"): 1.0,
        ("npu_hbm_ecc_errors_total", "single"): 340.0,
        ("npu_hbm_ecc_errors_total", "double"): 2.0,
        ("npu_hbm_ecc_isolated_pages", "single"): 4.0,
        ("npu_hbm_ecc_isolated_pages", "double"): 3.0,
    }
    assert all(tuple(k for k, _ in s.labels) == ("npu", "chip", "bit") for s in out)


def test_ecc_ddr_is_parsed_but_not_exported_and_na_drops_the_series() -> None:
    record = parse_ecc(read("ecc_910_ddr_nonzero_hbm_na.txt"))
    assert record.ddr.single_bit_errors == 5.0 and record.ddr.single_bit_total_errors == 9.0
    assert record.hbm.single_bit_errors is None and record.hbm.single_bit_isolated_pages is None
    out = ecc_samples(record, CHIP, CollectContext())
    assert {(s.metric, dict(s.labels)["bit"]) for s in out} == {
        ("npu_hbm_ecc_current_errors", "double"),
        ("npu_hbm_ecc_errors_total", "single"),
        ("npu_hbm_ecc_errors_total", "double"),
    }
    assert all(s.value == 0.0 for s in out)
