"""Where the tests find the repository, their fixtures and the shared capture corpus."""

from __future__ import annotations

import os
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]
REPO = TESTS.parent
FIXTURES = TESTS / "fixtures"
# The real captures (../shared/corpus beside the checkout, or $NPUWATCH_CORPUS): the conformance tier reads them.
CORPUS = Path(os.environ.get("NPUWATCH_CORPUS") or REPO.parent / "shared" / "corpus")
# The public reference material (../shared/reference beside the checkout, or $NPUWATCH_REFERENCE): the DCMI
# headers the layout test compiles against.
REFERENCE = Path(os.environ.get("NPUWATCH_REFERENCE") or REPO.parent / "shared" / "reference")


def corpus_file(path: Path) -> Path:
    """``path``, a capture of the corpus, or the calling test skips: the corpus lives beside a checkout (in
    ``shared/``), and a clone without it runs every test but those that read it."""
    if not path.is_file():
        import pytest

        pytest.skip(f"the capture corpus is not here: {path}")
    return path
