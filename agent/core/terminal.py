"""How a command talks to a person at a terminal: colour on its output, progress on stderr.

Colour follows https://no-color.org: ``--color always`` and ``--color never`` decide outright;
``auto`` (the default) colours a stream that is a terminal, unless ``NO_COLOR`` is set to a
non-empty value or ``TERM`` is ``dumb``. Progress is one self-rewriting line on stderr, drawn only
when stderr is a terminal, so a pipe, a file or a cron mail never sees it.

A command adds the flag with ``add_color_option(parser)``, decides once with ``use_color(args.color,
stream)``, styles its words with ``Style(enabled)`` and wraps slow work in ``Progress(label)``.

Width: ``terminal_width(stream)`` is the terminal's columns, or None for a pipe or a file (whose
lines stay whole, for grep); ``wrap`` folds text on word boundaries; ``one_line`` shortens a verdict
to a limit (node-problem-detector keeps 80 characters) without losing the word to act on.
"""

from __future__ import annotations

import os
import re
import shutil
import textwrap
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from types import TracebackType
from typing import IO, Any

__all__ = ["COLOR_CHOICES", "ELLIPSIS", "Progress", "Style", "add_color_option", "is_terminal", "one_line",
           "terminal_width", "use_color", "visible_len", "wrap"]

ELLIPSIS = "..."
MIN_WIDTH = 40  # narrower than this, wrapping makes a column of single words: keep the lines whole

COLOR_CHOICES = ("auto", "always", "never")

_RESET = "\x1b[0m"
_SGR = {"bold": "1", "dim": "2", "red": "31", "green": "32", "yellow": "33", "magenta": "35"}
# A severity word's look: red FAIL, yellow WARN, green PASS/ok, bold magenta UNKNOWN (told apart
# from both FAIL and WARN without colour vision by its boldness).
_SEVERITY = {
    "FAIL": ("bold", "red"),
    "WARN": ("yellow",),
    "PASS": ("green",),
    "OK": ("green",),
    "UNKNOWN": ("bold", "magenta"),
}


def add_color_option(parser: Any) -> None:
    """``--color auto|always|never`` on an argparse parser or argument group."""
    parser.add_argument("--color", dest="color", choices=COLOR_CHOICES, default="auto",
                        help="colour the output: auto (on a terminal, unless NO_COLOR is set), always or never "
                             "(default: auto)")


def is_terminal(stream: Any) -> bool:
    """True when ``stream`` is a terminal that can rewrite a line (not a pipe, a file or ``TERM=dumb``)."""
    try:
        tty = bool(stream.isatty())
    except (AttributeError, ValueError, OSError):  # no isatty, or a closed stream
        return False
    return tty and os.environ.get("TERM") != "dumb"


def use_color(choice: str | None, stream: Any, environ: Mapping[str, str] | None = None) -> bool:
    """Whether to colour what goes to ``stream``; ``choice`` is the ``--color`` value (None: auto)."""
    if choice == "always":
        return True
    if choice == "never":
        return False
    env = os.environ if environ is None else environ
    if env.get("NO_COLOR"):
        return False
    if env.get("TERM") == "dumb":
        return False
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError, OSError):
        return False


def visible_len(text: str) -> int:
    """Length of ``text`` on screen: escape sequences take no room."""
    length, inside = 0, False
    for char in text:
        if char == "\x1b":
            inside = True
        elif inside:
            inside = char != "m"
        else:
            length += 1
    return length


def terminal_width(stream: Any) -> int | None:
    """Columns of the terminal ``stream`` writes to (``COLUMNS`` wins, as ``shutil`` reads it); None when it
    is not a terminal."""
    if not is_terminal(stream):
        return None
    try:
        columns = os.get_terminal_size(stream.fileno()).columns
    except (AttributeError, ValueError, OSError):
        columns = shutil.get_terminal_size().columns
    env = os.environ.get("COLUMNS", "")
    if env.isdigit() and int(env) > 0:
        columns = int(env)
    return columns if columns > 0 else None


def wrap(text: str, width: int | None, indent: int = 0, first_indent: int | None = None) -> list[str]:
    """``text`` folded to ``width`` columns on spaces (never inside a word, a path or a code); lines after
    the first start with ``indent`` spaces, the first with ``first_indent`` (default none, when the caller
    has written the start of the line). ``width`` None: one line, unchanged."""
    lead = 0 if first_indent is None else first_indent
    if width is None or width - max(indent, lead) < MIN_WIDTH // 2 or len(text) + lead <= width:
        return [" " * lead + text]
    return textwrap.wrap(text, width=width, initial_indent=" " * lead, subsequent_indent=" " * indent,
                         break_long_words=False, break_on_hyphens=False) or [" " * lead]


def one_line(text: str, limit: int, keep: Iterable[str] = ()) -> str:
    """``text`` in at most ``limit`` characters, cut at a word boundary with ``...``; when the first of the
    ``keep`` words would be cut off, the middle goes instead: ``FAIL chip_health: ... is SeparateNPU``.

    The head up to the first ``": "`` (the verdict and the check) is kept either way, and the place after
    it when short (``NPU 5: ``)."""
    if len(text) <= limit:
        return text
    words = sorted(set(keep), key=len, reverse=True)
    found = re.search(r"\b(?:" + "|".join(map(re.escape, words)) + r")\b", text) if words else None
    tail = _cut(text, limit)
    if found is None or found.end() <= len(tail) - len(ELLIPSIS):
        return tail
    colon = text.find(": ")
    head = text[: colon + 2] if 0 <= colon < limit // 2 else ""
    where = text.find(": ", len(head))  # and a short place after it (``NPU 5: ``)
    if head and 0 <= where - len(head) <= _PLACE and where < found.start():
        head = text[: where + 2]
    end = found.end()
    more = end < len(text)
    room = limit - len(head) - len(ELLIPSIS) - 1 - (len(ELLIPSIS) + 1 if more else 0)
    if room < end - found.start():
        return _cut(text[found.start():], limit)  # the word itself, whatever comes before it
    start = max(len(head), end - room)
    space = text.find(" ", start - 1)
    if 0 <= space < found.start():
        start = space + 1
    middle = text[start:end]
    shortened = f"{head}{ELLIPSIS} {middle}" + (f" {ELLIPSIS}" if more else "")
    return shortened if len(shortened) <= limit else _cut(text, limit)


_PLACE = 16  # characters of the place after the head that a shortened verdict keeps (``NPU 15 chip 1``)


def _cut(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    room = limit - len(ELLIPSIS)
    space = text.rfind(" ", 0, room + 1)
    cut = text[:space] if space > room // 2 else text[:room]
    return cut.rstrip(" ,;:") + ELLIPSIS


class Style:
    """ANSI styling that returns the text unchanged when colour is off."""

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled

    def paint(self, text: str, *looks: str) -> str:
        if not self.enabled or not looks or not text:
            return text
        return f"\x1b[{';'.join(_SGR[look] for look in looks)}m{text}{_RESET}"

    def severity(self, word: str, text: str | None = None, *, strong: bool = False) -> str:
        """``text`` (default ``word``) in the colour of the severity ``word`` (FAIL, WARN, PASS, ok, UNKNOWN).

        ``strong`` adds bold, for the word that leads a verdict."""
        looks = _SEVERITY.get(word.upper(), ())
        if strong and "bold" not in looks:
            looks = ("bold", *looks)
        return self.paint(word if text is None else text, *looks)

    def bold(self, text: str) -> str:
        return self.paint(text, "bold")

    def dim(self, text: str) -> str:
        return self.paint(text, "dim")


class Progress:
    """One self-rewriting status line on stderr while slow work runs: ``| diagnose: 12/40 tool calls (3.1 s)``.

    Drawn only when the stream is a terminal; otherwise every method does nothing. A background
    thread turns the spinner and the clock, so a step that blocks for seconds still shows that the
    command is alive. Use it as a context manager; ``update`` may be called from any thread. The
    line is erased on exit, so what the command prints afterwards starts on a clean line.
    """

    FRAMES = "|/-\\"

    def __init__(self, label: str, stream: IO[str] | None = None, *, enabled: bool | None = None,
                 interval_s: float = 0.1, clock: Callable[[], float] = time.monotonic) -> None:
        import sys

        self.stream: IO[str] = stream if stream is not None else sys.stderr
        self.enabled = is_terminal(self.stream) if enabled is None else enabled
        self._label = label
        self._text = ""
        self._interval_s = interval_s
        self._clock = clock
        self._started = clock()
        self._frame = 0
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def update(self, text: str) -> None:
        """What is going on now (``reading 8 chips``); shown at the next turn of the spinner."""
        from agent.core.printable import printable

        with self._lock:
            self._text = printable(text)  # often a file name: it must not move the cursor
        if self.enabled and self._thread is None:
            self._draw()

    def __call__(self, text: str) -> None:
        self.update(text)

    def __enter__(self) -> Progress:
        if self.enabled:
            self._started = self._clock()
            self._thread = threading.Thread(target=self._spin, name="progress", daemon=True)
            self._thread.start()
        return self

    def __exit__(self, kind: type[BaseException] | None, value: BaseException | None,
                 trace: TracebackType | None) -> None:
        self.close()

    def close(self) -> None:
        if self._thread is not None:
            self._stop.set()
            self._thread.join()
            self._thread = None
        if self.enabled:
            self._write("\r\x1b[K")

    def _spin(self) -> None:
        while not self._stop.is_set():
            self._draw()
            self._stop.wait(self._interval_s)

    def _draw(self) -> None:
        with self._lock:
            frame = self.FRAMES[self._frame % len(self.FRAMES)]
            self._frame += 1
            text = self._text
        elapsed = self._clock() - self._started
        what = f": {text}" if text else ""
        self._write(f"\r\x1b[K{frame} {self._label}{what} ({elapsed:.1f} s)")

    def _write(self, text: str) -> None:
        try:
            self.stream.write(text)
            self.stream.flush()
        except (OSError, ValueError):  # the terminal went away: progress is not worth an error
            self.enabled = False
