"""Lines of styled segments, and the two ways ``npuwatch top`` makes them fit a width: ``fit`` cuts a line at the
last word that fits (never inside a word), ``wrap`` folds a text onto more lines at its spaces."""

from __future__ import annotations

import textwrap
from collections.abc import Sequence

__all__ = ["Line", "Segment", "fit", "plain", "width_of", "wrap"]

Segment = tuple[str, str]  # (text, style): "", "ok", "warn", "bad", "dim", "bold", "head", "sel"
Line = list[Segment]


def plain(lines: Sequence[Line]) -> str:
    return "\n".join("".join(text for text, _ in line).rstrip() for line in lines) + "\n"


def width_of(line: Line) -> int:
    return sum(len(text) for text, _ in line)


def fit(line: Line, width: int) -> Line:
    """``line`` in at most ``width`` characters; a cut falls on a space, and a word that does not fit goes whole."""
    if width_of(line) <= width:
        return line
    text = "".join(t for t, _ in line)
    cut = width
    if cut > 0 and text[cut] != " " and text[cut - 1] != " ":
        cut = max(0, text.rfind(" ", 0, cut))
    out: Line = []
    left = cut
    for segment, style in line:
        if left <= 0:
            break
        out.append((segment[:left], style))
        left -= len(segment[:left])
    if out:
        last, style = out[-1]
        out[-1] = (last.rstrip(), style)
    return out


def wrap(text: str, width: int, style: str = "", indent: int = 0) -> list[Line]:
    """``text`` folded at its spaces onto lines of ``width``, the second and later indented by ``indent``."""
    if width <= indent + 1:
        return [fit([(text, style)], width)]
    folded = textwrap.wrap(text, width, subsequent_indent=" " * indent, break_long_words=False,
                           break_on_hyphens=False) or [""]
    return [fit([(line, style)], width) for line in folded]
