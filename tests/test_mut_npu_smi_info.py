"""``collectors.npu_smi_info``: the Source a test builds itself (bench/mutation.py).

mutmut switches a mutant on after the modules are imported, so ``SOURCE = make_source()`` at
import time never sees one; this builds the Source inside the test.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from collectors.base import CollectContext, ParseError
from collectors.npu_smi_info import make_source, parse, samples

FIXTURES = Path(__file__).parent / "fixtures" / "npu_smi_tables"


def test_make_source_fields_parse_and_samples() -> None:
    source = make_source(max_chips=64)
    assert (source.name, source.tool, source.group, source.scope) == ("npu_smi_info", "npu-smi", "info", "node")
    assert source.argv(None) == ["info"]
    text = (FIXTURES / "info_910b3_x2_procs.txt").read_text()
    records = source.parse(text)
    assert records == (parse(text),)
    ctx = CollectContext()
    assert source.samples(records, None, ctx) == samples(records[0], None, ctx)
    assert source.samples([*records, *records], None, ctx) == samples(records[0], None, ctx) * 2


def test_make_source_refuses_more_chips_than_its_cap() -> None:
    text = (FIXTURES / "info_910b3_x2_procs.txt").read_text()
    chips = len(parse(text).chips)
    assert len(make_source(max_chips=chips).parse(text)[0].chips) == chips
    with pytest.raises(ParseError, match=rf"^{chips} chips, more than max_chips={chips - 1}"):
        make_source(max_chips=chips - 1).parse(text)
