"""The fault table's own health as metrics: how many entries of each table file were skipped."""

from __future__ import annotations

from collectors.base import Sample
from collectors.fault_levels import FaultTable

__all__ = ["SKIPPED_METRIC", "table_samples"]

SKIPPED_METRIC = "npuwatch_fault_table_skipped_entries"


def table_samples(table: FaultTable) -> list[Sample]:
    """One sample per file the table was read from: the rules, lists and codes in it that were skipped."""
    return [Sample(SKIPPED_METRIC, (("file", path),), float(table.skipped_in(path))) for path in table.files]
