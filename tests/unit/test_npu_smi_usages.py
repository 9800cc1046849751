"""``npu-smi info -t usages`` and ``-t common`` (the "usages" group): golden records and samples."""

from __future__ import annotations

import pytest

from collectors._text import MIB
from collectors.base import ChipRef, CollectContext, Sample
from collectors.npu_smi_common import CommonRecord
from collectors.npu_smi_common import parse as parse_common
from collectors.npu_smi_common import samples as common_samples
from collectors.npu_smi_usages import UsagesRecord, parse, samples
from tests.support import paths

FIXTURES = paths.FIXTURES / "npu_smi_kv"
CHIP = ChipRef(3, 0)


def read(name: str) -> str:
    return (FIXTURES / name).read_text()


def values(out: list[Sample]) -> dict[str, float]:
    return {s.metric: s.value for s in out}


def test_usages_golden_910b_tab_indented() -> None:
    assert parse(read("usages_910b_tab_chip_id_last.txt")) == UsagesRecord(
        ddr_capacity_bytes=0.0, ddr_usage_ratio=0.0, ddr_hugepages_total_pages=0.0,
        ddr_hugepages_usage_ratio=0.0, hbm_capacity_bytes=65536 * MIB, hbm_usage_ratio=0.87,
        aicore_usage_ratio=0.62, aivector_usage_ratio=0.15, aicpu_usage_ratio=0.02,
        ctrlcpu_usage_ratio=0.07, ddr_bandwidth_usage_ratio=0.0, hbm_bandwidth_usage_ratio=0.41,
    )


def test_usages_picks_the_requested_chip_of_a_310p_duo_card() -> None:
    text = read("usages_310p_duo_two_chips.txt")
    first, second = parse(text), parse(text, chip=1)
    assert first.ddr_capacity_bytes == 44000 * MIB and first.ctrlcpu_usage_ratio == 0.04
    assert second.ddr_capacity_bytes == 43000 * MIB and second.ctrlcpu_usage_ratio == 0.08
    assert second.vectorcore_usage_ratio == 0.12 and second.aivector_usage_ratio is None
    assert parse(text, chip=7) == first  # unknown chip id: first chip block


def test_usages_na_out_of_range_and_missing_keys_are_none() -> None:
    record = parse(read("usages_na_and_missing.txt"))
    assert record.hbm_capacity_bytes is None and record.hbm_usage_ratio is None
    assert record.aicore_usage_ratio is None  # 250 % is not a percentage
    assert record.aicpu_usage_ratio is None and record.aivector_usage_ratio is None
    assert record.hbm_bandwidth_usage_ratio is None
    assert (record.ctrlcpu_usage_ratio, record.npu_utilization_ratio, record.aicube_usage_ratio) == (
        0.33, 0.71, 0.64)


def test_usages_samples_map_to_catalogue_names_and_skip_missing_values() -> None:
    out = samples([parse(read("usages_910b_tab_chip_id_last.txt"))], CHIP, CollectContext())
    assert values(out) == {
        "npu_aivector_utilization_ratio": 0.15,
        "npu_aicpu_utilization_ratio": 0.02,
        "npu_ctrlcpu_utilization_ratio": 0.07,
        "npu_hbm_bandwidth_utilization_ratio": 0.41,
    }
    assert all(s.labels == (("npu", "3"), ("chip", "0")) for s in out)
    # aicore and HBM usage belong to the info table, never to this source
    assert not any("aicore" in s.metric or s.metric.startswith("npu_hbm_used") for s in out)
    sparse = samples(parse(read("usages_na_and_missing.txt")), CHIP, CollectContext())
    assert values(sparse) == {"npu_ctrlcpu_utilization_ratio": 0.33}


def test_usages_310p_vectorcore_feeds_the_aivector_metric() -> None:
    out = samples(parse(read("usages_310p_duo_two_chips.txt"), chip=1), ChipRef(2, 1), CollectContext())
    assert values(out)["npu_aivector_utilization_ratio"] == 0.12
    assert "npu_hbm_bandwidth_utilization_ratio" not in values(out)


def test_common_golden_chip_id_first_mcu_last() -> None:
    assert parse_common(read("common_chip_id_first_mcu_last.txt")) == CommonRecord(
        memory_usage_ratio=0.0, hbm_usage_ratio=0.55, aicore_usage_ratio=0.98,
        aicore_max_frequency_hertz=1.8e9, aicore_frequency_hertz=1.65e9, aicore_count=24.0,
        temperature_celsius=58.0, power_watts=312.7, mcu_temperature_celsius=41.0,
    )


def test_common_mcu_first_is_not_taken_for_the_chip() -> None:
    record = parse_common(read("common_mcu_first_chip_id_last.txt"))
    assert record.temperature_celsius == 47.0 and record.mcu_temperature_celsius == 39.0
    assert record.power_watts is None and record.mcu_power_watts == 55.2
    assert record.aicore_frequency_hertz is None and record.aicore_max_frequency_hertz == 1.08e9


def test_common_mcu_without_blank_separator() -> None:
    record = parse_common(read("common_mcu_no_blank_separator.txt"))
    assert (record.temperature_celsius, record.mcu_temperature_celsius) == (61.0, 40.0)


def test_common_samples_are_the_two_clocks() -> None:
    out = common_samples([parse_common(read("common_chip_id_first_mcu_last.txt"))], CHIP, CollectContext())
    assert values(out) == {"npu_aicore_frequency_hertz": 1.65e9, "npu_aicore_max_frequency_hertz": 1.8e9}
    partial = common_samples(parse_common(read("common_mcu_first_chip_id_last.txt")), CHIP, CollectContext())
    assert values(partial) == {"npu_aicore_max_frequency_hertz": 1.08e9}


@pytest.mark.parametrize("mapper", [samples, common_samples])
def test_no_chip_or_no_record_gives_no_samples(mapper: object) -> None:
    assert mapper([], CHIP, CollectContext()) == []  # type: ignore[operator]
    assert mapper([UsagesRecord(aicpu_usage_ratio=0.5), CommonRecord(aicore_frequency_hertz=1.0)],  # type: ignore[operator]
                  None, CollectContext()) == []
