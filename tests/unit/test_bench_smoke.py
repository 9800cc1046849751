"""The benchmark scripts' shared helpers (tables, percentiles, series counts) and their verdicts.

The scripts themselves run with --quick, and their tables are checked, in tests/integration/test_bench_smoke.py.
"""

from __future__ import annotations

import sys

import pytest

from tests.support.bench_tables import judged_right, table_rows
from tests.support.paths import REPO

sys.path.insert(0, str(REPO))

from bench._util import Table, count_series, percentile


def test_the_judgement_helper_can_fail() -> None:
    assert judged_right(["series", "1465", "<= 1500", "yes"])
    assert not judged_right(["series", "1465", "<= 1500", "NO"])
    assert not judged_right(["scrape p99", "28.96 ms", "< 5 ms", "yes"])
    assert judged_right(["scrape p99", "28.96 ms", "< 5 ms", "NO"])
    assert judged_right(["tool processes/min", "22.0", "~22.1 (schedule)", "yes"])
    assert not judged_right(["tool processes/min", "233.3", "~22.1 (schedule)", "yes"])


def test_percentile_is_nearest_rank() -> None:
    values = [float(v) for v in range(1, 101)]
    assert percentile(values, 50) == 50.0
    assert percentile(values, 99) == 99.0
    assert percentile([3.0], 99) == 3.0


def test_count_series_skips_comments_and_blanks() -> None:
    body = b"# HELP a x\n# TYPE a gauge\na 1\na{b=\"c\"} 2\n\n"
    assert count_series(body) == 2


def test_table_renders_columns_and_notes() -> None:
    table = Table()
    table.add("series", 12, "<= 1500", "yes")
    table.note("hello")
    rows = table_rows(table.render())
    assert rows["series"] == ["series", "12", "<= 1500", "yes"]
    assert table.render().endswith("note: hello")
    with pytest.raises(ValueError, match="expected 4 cells"):
        table.add("too", "few")
