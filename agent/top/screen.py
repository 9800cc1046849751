"""The live screen of ``npuwatch top``: curses paints ``render.frame``'s lines, a reader thread refreshes the view
every interval, the keys change the sort, the selection and the panel.

curses, from the standard library, because top runs on the nodes, over ssh, often air-gapped. Measured here
(import time and resident memory it adds, on the loaded 2-core development machine): curses 1 ms and 0.5 MiB;
rich (``rich.live``, ``rich.table``) 287 ms and 4.9 MiB, three packages (rich, pygments, markdown-it-py);
textual (``textual.app``, ``textual.widgets``) 1.1 s and 19 MiB, seven packages. urwid is one package but was
not measured (not installed here), and its own event loop would replace this one for no gain. curses handles
resize (KEY_RESIZE), colour and its absence (``NO_COLOR``, or a terminal without colours), and the keys.
"""

from __future__ import annotations

import curses
import os
import threading
from collections.abc import Callable

from agent.top.history import History
from agent.top.model import Fetched
from agent.top.render import SORT_KEYS, Line, TopState, frame, sorted_rows

__all__ = ["apply_key", "run_screen"]

_SORTS = list(SORT_KEYS)
_ESC = 27


def apply_key(state: TopState, key: int, rows: int) -> bool:
    """Change ``state`` for a key; True when the key quits."""
    if state.help:
        state.help = False  # any key closes the help
        return key in (ord("q"), ord("Q"))
    if key in (ord("q"), ord("Q")):
        return True
    if key in (ord("?"), ord("h")):
        state.help = True
    elif key in (ord("s"), ord("S")):
        step = 1 if key == ord("s") else -1
        state.sort = _SORTS[(_SORTS.index(state.sort) + step) % len(_SORTS)] if state.sort in _SORTS else "npu"
    elif key == ord("r"):
        state.reverse = not state.reverse
    elif key in (curses.KEY_DOWN, ord("j")):
        state.selected = min(max(0, rows - 1), state.selected + 1)
    elif key in (curses.KEY_UP, ord("k")):
        state.selected = max(0, state.selected - 1)
    elif key in (curses.KEY_ENTER, 10, 13):
        state.detail = not state.detail
    elif key == _ESC:
        state.detail = False
    return False


class _Refresher(threading.Thread):
    """Reads the agent every ``interval_s`` so a slow agent never freezes the keys."""

    def __init__(self, read: Callable[[], Fetched], interval_s: float) -> None:
        super().__init__(name="top-reader", daemon=True)
        self._read = read
        self._interval_s = interval_s
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self.history = History()
        self.latest = self._take()

    def _take(self) -> Fetched:
        fetched = self._read()
        if fetched.error is None and fetched.view is not None:
            self.history.add(fetched.view)
        return fetched

    def run(self) -> None:
        while not self._stop.wait(self._interval_s):
            fetched = self._take()
            with self._lock:
                self.latest = fetched

    def current(self) -> Fetched:
        with self._lock:
            return self.latest

    def stop(self) -> None:
        self._stop.set()


def _styles(color: bool) -> dict[str, int]:
    styles = {"": curses.A_NORMAL, "dim": curses.A_DIM, "bold": curses.A_BOLD, "head": curses.A_BOLD,
              "sel": curses.A_REVERSE, "ok": curses.A_NORMAL, "warn": curses.A_BOLD,
              "bad": curses.A_BOLD | curses.A_UNDERLINE}
    if color and curses.has_colors():
        curses.start_color()
        with _ignored():
            curses.use_default_colors()
        for number, colour in ((1, curses.COLOR_GREEN), (2, curses.COLOR_YELLOW), (3, curses.COLOR_RED),
                               (4, curses.COLOR_CYAN)):
            curses.init_pair(number, colour, -1)
        styles.update(ok=curses.color_pair(1), warn=curses.color_pair(2) | curses.A_BOLD,
                      bad=curses.color_pair(3) | curses.A_BOLD, head=curses.color_pair(4) | curses.A_BOLD)
    return styles


class _ignored:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> bool:
        return exc[0] is not None and issubclass(exc[0], curses.error)  # type: ignore[arg-type]


def _paint(window: curses.window, lines: list[Line], styles: dict[str, int]) -> None:
    height, width = window.getmaxyx()
    window.erase()
    for y, line in enumerate(lines[:height]):
        x = 0
        for text, style in line:
            room = width - x - (1 if y == height - 1 else 0)  # the last cell of the last row cannot be written
            if room <= 0:
                break
            with _ignored():
                window.addnstr(y, x, text, room, styles.get(style, curses.A_NORMAL))
            x += min(len(text), room)
    window.refresh()


def run_screen(read: Callable[[], Fetched], *, interval_s: float, node: str, state: TopState,
               color: bool | None = None) -> int:
    """The live view until ``q``; 0."""
    color = (not os.environ.get("NO_COLOR")) if color is None else color
    refresher = _Refresher(read, interval_s)
    refresher.start()

    def loop(window: curses.window) -> int:
        with _ignored():
            curses.curs_set(0)
        window.keypad(True)
        window.timeout(200)
        styles = _styles(color)
        while True:
            height, width = window.getmaxyx()
            fetched = refresher.current()
            _paint(window, frame(fetched, refresher.history, state, width=width, height=height, node=node), styles)
            key = window.getch()
            if key in (-1, curses.KEY_RESIZE):
                continue
            rows = len(sorted_rows(fetched.view, state)) if fetched.view is not None else 0
            if apply_key(state, key, rows):
                return 0

    # The terminal's own size, not $LINES/$COLUMNS: exported (tmux and some shells do), curses would take
    # their size over the terminal's and never follow a resize.
    for name in ("LINES", "COLUMNS"):
        os.environ.pop(name, None)
    try:
        return curses.wrapper(loop)
    finally:
        refresher.stop()
