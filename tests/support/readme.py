"""The README's sections as tests read them."""

from __future__ import annotations

from tests.support.paths import REPO

README = (REPO / "README.md").read_text(encoding="utf-8")


def readme_command(section: str) -> str:
    """The one command in the first ``sh`` block of a README section."""
    block = README.split(f"## {section}", 1)[1].split("```sh", 1)[1].split("```", 1)[0]
    lines = [line.strip() for line in block.strip().splitlines()]
    assert len(lines) == 1, f"{section}: one command, not {lines}"
    return lines[0]
