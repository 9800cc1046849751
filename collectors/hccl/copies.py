"""Copies of one failure across files: a process's plog line and the job log's copy of it (the screen, torchrun's
``[rankN]:`` stderr), or the code the screen prints for what the plog words (EI0002 beside a ``Task run failed``
block). Within one file the classifier joins them (``collectors.hccl.classify``); across files this does.

Two events are one failure when they come from different files, have the same category, the same process
(the ``MODULE(pid,`` / ``[PID: n]`` / ``(PID:n`` its line prints, else the rank its prefix names; a rank
both name must agree) and the same second (give or take one: a copy is stamped when it is printed). Events
with no time or no process are never copies. The memory of what was counted is bounded (``KEPT``): copies
further apart in a scan than that many counted events are counted twice, never lost.
"""

from __future__ import annotations

import re
from collections import OrderedDict
from dataclasses import replace

from collectors.hccl.classify import Event
from collectors.hccl.codes import is_ascend_code

__all__ = ["KEPT", "CopyFolder"]

KEPT = 16_384
_PER_KEY = 8  # events of one process, category and second from different ranks or files
_PID_RE = re.compile(r"[A-Z][A-Z0-9_]*\((\d+),[^)]*\):|\[PID: ?(\d+)\]|\(PID: ?(\d+)")


def _process(event: Event) -> tuple[str, int] | None:
    match = _PID_RE.search(event.text)
    if match is not None:
        return "pid", int(next(group for group in match.groups() if group is not None))
    return None if event.rank is None else ("rank", event.rank)


def _same(counted: Event, event: Event) -> bool:
    """Another file's event of the same process that names no other rank."""
    return counted.source != event.source and (counted.rank is None or event.rank is None
                                               or counted.rank == event.rank)


class CopyFolder:
    """``fold(event)``: the counted event this one is a copy of (None: count it); ``prefer`` keeps the printed
    code."""

    def __init__(self) -> None:
        self._counted: OrderedDict[tuple[str, str, int, int], list[Event]] = OrderedDict()

    def fold(self, event: Event) -> Event | None:
        if event.timestamp is None:
            return None
        process = _process(event)
        if process is None:
            return None
        second = int(event.timestamp)
        for near in (second, second - 1, second + 1):
            for counted in self._counted.get((event.category, *process, near), ()):
                if _same(counted, event):
                    return counted
        key = (event.category, *process, second)
        kept = self._counted.get(key)
        if kept is None:
            self._counted[key] = [event]
            while len(self._counted) > KEPT:
                self._counted.popitem(last=False)
        elif len(kept) < _PER_KEY:
            kept.append(event)
        return None

    @staticmethod
    def prefer(counted: Event, copy: Event) -> bool:
        """Whether the copy's code should stand for the failure: it is printed, the counted one only worded."""
        return is_ascend_code(copy.code) and not is_ascend_code(counted.code)

    def recoded(self, counted: Event, copy: Event) -> None:
        """The failure ``counted`` stands for is counted under ``copy``'s code from now on."""
        if counted.timestamp is None:
            return
        process = _process(counted)
        kept = self._counted.get((counted.category, *process, int(counted.timestamp))) if process else None
        if kept is not None and counted in kept:
            kept[kept.index(counted)] = replace(counted, code=copy.code)
