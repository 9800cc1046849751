"""Every parsed capture of the shared corpus gives exactly its recorded records (tests/support/corpus_golden.py).

The hand-written conformance tests pin the values that matter most per capture; this pins every field of
every capture, so no parser change alters what a real capture yields unnoticed. Skips without the corpus.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support import corpus_golden

if not corpus_golden.TOOLS.is_dir():
    pytest.skip(f"corpus not found at {corpus_golden.CORPUS}", allow_module_level=True)

CAPTURES = corpus_golden.captures()


def test_most_captures_have_a_parser() -> None:
    assert len(CAPTURES) >= 70


@pytest.mark.parametrize("path", CAPTURES, ids=lambda p: p.name[:80])
def test_capture_gives_its_recorded_records(path: Path) -> None:
    golden = corpus_golden.golden_path(path)
    assert golden.exists(), f"no golden records for {path.name}: run `python -m tests.support.corpus_golden` and review"
    assert corpus_golden.records(path) == json.loads(golden.read_text(encoding="utf-8"))


def test_no_golden_file_is_left_without_its_capture() -> None:
    names = {corpus_golden.golden_path(path).name for path in CAPTURES}
    assert sorted(p.name for p in corpus_golden.GOLDEN.iterdir() if p.name not in names) == []
