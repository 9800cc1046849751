"""How a command talks to a person at a terminal: colour on its output, progress on stderr.

Colour follows https://no-color.org: ``--color always`` and ``--color never`` decide outright;
``auto`` (the default) colours a stream that is a terminal, unless ``NO_COLOR`` is set to a
non-empty value or ``TERM`` is ``dumb``. Progress is one self-rewriting line on stderr, drawn only
when stderr is a terminal, so a pipe, a file or a cron mail never sees it.

A command adds the flag with ``add_color_option(parser)``, decides once with ``use_color(args.color,
stream)``, styles its words with ``Style(enabled)`` and wraps slow work in ``Progress(label)``.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Mapping
from types import TracebackType
from typing import IO, Any

__all__ = ["COLOR_CHOICES", "Progress", "Style", "add_color_option", "is_terminal", "use_color", "visible_len"]

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
        with self._lock:
            self._text = text
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
