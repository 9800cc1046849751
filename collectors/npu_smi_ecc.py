"""``npu-smi info -t ecc -i N [-c C]``: DDR/HBM ECC counters (keys padded to 40 columns).

Sample output (910, driver 23.0.5)::

    HBM Single Bit Error Count               : 0
    HBM Double Bit Error Count               : 0
    HBM Single Bit Aggregate Total Err Cnt   : 0
    HBM Double Bit Aggregate Total Err Cnt   : 0
    HBM Single Bit Isolated Pages Count      : 0
    HBM Double Bit Isolated Pages Count      : 0
    Chip ID                                  : 0

950 adds ``HBM Single|Double Bit Next-Isolated Pages Count``. Exported (HBM only;
DDR is parsed but not exported): ``npu_hbm_ecc_current_errors{bit}``,
``npu_hbm_ecc_errors_total{bit}``, ``npu_hbm_ecc_isolated_pages{bit}`` with
``bit`` = ``single`` | ``double``.

npu-smi prints the counters with ``%u``, so a well-behaved tool never prints a
negative count; ``NA`` means absent. A negative value (``-1`` is how a failed
read leaks through other vendors' tools), a fraction or a count beyond 64 bits
is not a count: it is dropped (no sample, never exported as a sentinel) and
listed in ``EccRecord.rejected``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from collectors.base import ChipRef, CollectContext, Sample, Source
from collectors.bounds import Rejection, Rejects
from collectors.npu_smi_kv import KvBlock, chip_argv, chip_sample, one_record, parse_blocks, require_block

__all__ = ["SOURCE", "EccCounts", "EccRecord", "parse", "samples"]

_BITS = ("single", "double")
_KINDS = {
    "errors": r"Error\s*Count",
    "total_errors": r"Aggregate\s*Total\s*Err(?:or)?\s*Cnt",
    "isolated_pages": r"Isolated\s*Pages\s*Count",
    "next_isolated_pages": r"Next[-\s]*Isolated\s*Pages\s*Count",
}


@dataclass(frozen=True)
class EccCounts:
    """One memory's counters; None where the key is absent or NA."""

    single_bit_errors: float | None = None
    double_bit_errors: float | None = None
    single_bit_total_errors: float | None = None
    double_bit_total_errors: float | None = None
    single_bit_isolated_pages: float | None = None
    double_bit_isolated_pages: float | None = None
    single_bit_next_isolated_pages: float | None = None
    double_bit_next_isolated_pages: float | None = None

    def count(self, bit: str, kind: str) -> float | None:
        value: float | None = getattr(self, f"{bit}_bit_{kind}")
        return value


@dataclass(frozen=True)
class EccRecord:
    ddr: EccCounts = field(default_factory=EccCounts)
    hbm: EccCounts = field(default_factory=EccCounts)
    rejected: tuple[Rejection, ...] = ()  # lines and values refused (collectors.bounds)


def _pattern(memory: str, bit: str, kind: str) -> str:
    return rf"{memory}\s*{bit}\s*Bit\s*{_KINDS[kind]}"


def _count(block: KvBlock, pattern: str, rejects: Rejects) -> float | None:
    """A counter: a non-negative integer (``-1`` and other negatives are dropped, not exported)."""
    value = block.checked(pattern, "counter", rejects)
    if value is not None and not value.is_integer():
        rejects.add("ECC count is not an integer", *block.where(pattern))
        return None
    return value


def _counts(block: KvBlock, memory: str, rejects: Rejects) -> EccCounts:
    values: dict[str, float | None] = {}
    for bit in _BITS:
        for kind in _KINDS:
            values[f"{bit}_bit_{kind}"] = _count(block, _pattern(memory, bit, kind), rejects)
    return EccCounts(**values)


def parse(text: str, chip: int | None = None) -> EccRecord:
    """Parse ``-t ecc`` output; raises ParseError when no DDR/HBM ECC key is printed."""
    any_key = r"(?:DDR|HBM)\s*(?:Single|Double)\s*Bit\s*.*"
    rejects = Rejects()
    block = require_block(parse_blocks(text, rejects), (any_key,), "ecc", chip)
    ddr, hbm = _counts(block, "DDR", rejects), _counts(block, "HBM", rejects)
    return EccRecord(ddr=ddr, hbm=hbm, rejected=rejects.freeze())


def parse_records(text: str) -> list[EccRecord]:
    """The Source's parser: a one-element list, as ``Source.parse`` returns a sequence."""
    return [parse(text)]


_METRICS = (
    ("npu_hbm_ecc_current_errors", "errors"),
    ("npu_hbm_ecc_errors_total", "total_errors"),
    ("npu_hbm_ecc_isolated_pages", "isolated_pages"),
)


def samples(records: Sequence[Any] | EccRecord, chip: ChipRef | None,
            ctx: CollectContext | None = None) -> list[Sample]:
    record = one_record(records, EccRecord)
    if record is None or chip is None:
        return []
    out: list[Sample] = []
    for metric, kind in _METRICS:
        for bit in _BITS:
            value = record.hbm.count(bit, kind)
            if value is not None:
                out.append(chip_sample(metric, chip, value, bit=bit))
    return out


SOURCE = Source(
    name="npu_smi_ecc",
    tool="npu-smi",
    group="health",
    scope="chip",
    argv=lambda chip: chip_argv("ecc", chip),
    parse=parse_records,
    samples=samples,
)
