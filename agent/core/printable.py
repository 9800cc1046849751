"""Text from logs, tools and bundles made safe to print on a terminal.

A log line, a file name, a peer address or a node name read from a bundle is data, not terminal
commands: ``printable`` writes every control character (C0, DEL, C1, ESC among them) and every
Unicode bidirectional override as a visible escape (``\\x1b``, ``\\u202e``), so ``\\x1b[2J`` cannot clear the
screen and a fake coloured ``verdict: OK`` is shown as the characters it is made of. Renderers apply it
to each piece of outside text before they lay it out and colour it: their own colours stay, none
from the data gets through.
"""

from __future__ import annotations

import re

__all__ = ["printable", "printable_lines"]

# C0 controls (tab and newline among them: a field is one line), DEL, C1 controls, and the marks that
# reorder what follows them on screen (bidi embeddings, overrides and isolates).
_UNSAFE = re.compile("[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def _escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}"


def printable(text: object) -> str:
    """``str(text)`` with every control and bidi-override character as a visible escape (one line)."""
    return _UNSAFE.sub(_escape, str(text))


def printable_lines(text: str) -> str:
    """Like ``printable``, keeping the newlines (and tabs) that give a text of our own its lines."""
    return "\n".join("\t".join(printable(part) for part in line.split("\t")) for line in text.split("\n"))
