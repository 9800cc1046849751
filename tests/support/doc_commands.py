"""The shell commands of the manual (README.md and docs/*.md), read as a reader pastes them.

Every line of a fenced ``sh`` (``bash``, ``shell``) block is a command, its trailing ``  # comment`` removed
and a backslash continuation joined; a line that is only a comment is none. tests/e2e/test_doc_commands.py
runs each against a demo agent and a local Prometheus, as written, and wants exit status 0.

What cannot run there says so in the page, in HTML comments (invisible on GitHub) on the lines right above
the block, each with its reason in parentheses:

    <!-- shell-test: skip (needs root and systemd) -->                  the whole block is not run
    <!-- shell-test: skip `journalctl -u npuwatch -n 50` (needs systemd) -->   that command is not run
    <!-- shell-test: exit 3 `npuwatch check --demo --level medium --json > healthy.json` (why) -->
                                                                        that command must exit 3

A command is named as the block has it, comment removed. A marker that is not one of these, stands above
no block, or names a command the block does not have is an error: a marker can only skip what it says,
and never outlives the command it was written for.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from tests.support.paths import REPO

__all__ = ["PAGES", "Block", "Command", "MarkerError", "blocks", "page_blocks"]

PAGES = (REPO / "README.md", *sorted((REPO / "docs").glob("*.md")))

_FENCE = re.compile(r"^```(?:sh|bash|shell)\s*$")
_MARKER_START = "<!-- shell-test"
_MARKER = re.compile(r"<!-- shell-test: (?:(?P<skip>skip)|exit (?P<exit>\d+))(?: `(?P<command>[^`]+)`)?"
                     r" \((?P<reason>[^()]+(?:\([^()]*\)[^()]*)*)\) -->")
_COMMENT = re.compile(r"\s+#\s.*$")


class MarkerError(ValueError):
    """A shell-test marker that is malformed, stands above no block, or matches no line."""


@dataclass(frozen=True)
class Command:
    page: str  # relative to the repository
    line: int  # of the command's first line in the page
    text: str
    exit: int = 0  # the status it must end with
    skipped: str | None = None  # the marker's reason when it is not run

    @property
    def where(self) -> str:
        return f"{self.page}:{self.line}"


@dataclass(frozen=True)
class Block:
    page: str
    line: int  # of the opening fence
    commands: tuple[Command, ...]

    @property
    def run(self) -> tuple[Command, ...]:
        return tuple(command for command in self.commands if command.skipped is None)


@dataclass(frozen=True)
class _Marker:
    line: int
    skip: bool
    exit: int
    command: str | None  # None: every command of the block
    reason: str


def _marker(text: str, line: int, where: str) -> _Marker:
    found = _MARKER.fullmatch(text.strip())
    if not found:
        raise MarkerError(f"{where}:{line}: not a shell-test marker: {text.strip()!r}")
    if not found["skip"] and not found["command"]:
        raise MarkerError(f"{where}:{line}: `exit N` needs the command it is for")
    return _Marker(line, bool(found["skip"]), int(found["exit"] or 0), found["command"], found["reason"].strip())


def _commands(lines: list[tuple[int, str]]) -> list[tuple[int, str]]:
    """(line, command) for the block's lines: comments removed, continuations joined."""
    out: list[tuple[int, str]] = []
    pending: tuple[int, str] | None = None
    for number, raw in lines:
        text = raw.strip()
        if pending is None and (not text or text.startswith("#")):
            continue
        text = _COMMENT.sub("", text).strip()
        if pending is not None:
            number, text = pending[0], f"{pending[1]} {text}"
            pending = None
        if text.endswith("\\"):
            pending = (number, text[:-1].rstrip())
            continue
        out.append((number, text))
    if pending is not None:
        out.append(pending)
    return out


def _apply(markers: list[_Marker], number: int, text: str) -> tuple[int, str | None]:
    exit_status, skipped = 0, None
    for marker in markers:
        if marker.command is not None and marker.command != text:
            continue
        if marker.skip:
            skipped = marker.reason
        else:
            exit_status = marker.exit
    return exit_status, skipped


def blocks(text: str, where: str) -> list[Block]:
    """The shell blocks of a page's ``text`` (``where``: its name in errors and in the blocks)."""
    lines = text.splitlines()
    found: list[Block] = []
    markers: list[_Marker] = []
    index = 0
    while index < len(lines):
        line = lines[index]
        if line.strip().startswith(_MARKER_START):
            markers.append(_marker(line, index + 1, where))
            index += 1
            continue
        if _FENCE.match(line):
            start = index + 1
            index += 1
            body: list[tuple[int, str]] = []
            while index < len(lines) and not lines[index].startswith("```"):
                body.append((index + 1, lines[index]))
                index += 1
            commands = []
            for number, command in _commands(body):
                exit_status, skipped = _apply(markers, number, command)
                commands.append(Command(where, number, command, exit_status, skipped))
            for marker in markers:
                if marker.command is not None and not any(c.text == marker.command for c in commands):
                    raise MarkerError(f"{where}:{marker.line}: the block has no command {marker.command!r}")
            found.append(Block(where, start, tuple(commands)))
            markers = []
        elif markers:
            raise MarkerError(f"{where}:{markers[0].line}: a shell-test marker must stand right above a sh block")
        index += 1
    if markers:
        raise MarkerError(f"{where}:{markers[0].line}: a shell-test marker must stand right above a sh block")
    return found


def page_blocks(pages: tuple[Path, ...] = PAGES) -> list[Block]:
    """Every shell block of the manual, page by page in order."""
    return [block for page in pages
            for block in blocks(page.read_text(encoding="utf-8"), str(page.relative_to(REPO)))]
