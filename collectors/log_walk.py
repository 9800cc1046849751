"""Find log files matching glob patterns under a root, with bounds a hostile tree cannot break.

``glob.glob(recursive=True)`` follows symlinked directories under ``**``: two links to ``.`` make it
walk until path names overflow, growing without bound. This walker matches one path segment at a
time (so ``debug/plog/*.log`` reads two directories, not the tree), expands ``**`` without following
symlinked directories and never enters the same directory twice (a bind-mount loop), stops at a
depth, and stops at a budget of directory entries per walk, saying so. A directory it may not read is
reported, not skipped in silence. Hidden names (leading ``.``) match only a segment that starts with
``.``, as in ``glob``.

Written here rather than taken from a library: the standard library's walkers follow links under
``**`` (glob) or match nothing segment-wise (os.walk + fnmatch walks the whole tree for a two-level
pattern); this is the small piece in between.
"""

from __future__ import annotations

import fnmatch
import glob
import os
import stat
from dataclasses import dataclass, field

__all__ = ["MAX_DEPTH", "MAX_ENTRIES", "WalkResult", "walk_matches"]

MAX_DEPTH = 16  # directory levels under the root a ** may descend
MAX_ENTRIES = 200_000  # directory entries looked at per walk (a few seconds of scandir at most)


@dataclass
class WalkResult:
    files: list[str] = field(default_factory=list)  # matching regular files (paths as found), sorted per dir
    unreadable: list[str] = field(default_factory=list)  # "path: why" for directories that could not be listed
    capped: str | None = None  # why the walk stopped early (entry budget), None when it saw everything
    entries: int = 0


def _matches(name: str, segment: str, hidden: bool = False) -> bool:
    if name.startswith(".") and not segment.startswith(".") and not hidden:
        return False
    return fnmatch.fnmatchcase(name, segment) if glob.has_magic(segment) else name == segment


class _Walker:
    def __init__(self, max_entries: int, max_depth: int, result: WalkResult, hidden: bool = False) -> None:
        self.max_entries = max_entries
        self.max_depth = max_depth
        self.hidden = hidden
        self.result = result
        self.visited: set[tuple[int, int]] = set()
        self.listed: dict[str, list[os.DirEntry[str]]] = {}  # a ** step and its next segment share a listing

    def list_dir(self, directory: str) -> list[os.DirEntry[str]]:
        if directory in self.listed:
            return self.listed[directory]
        self.listed[directory] = entries = self._scan(directory)
        return entries

    def _scan(self, directory: str) -> list[os.DirEntry[str]]:
        if self.result.capped:
            return []
        try:
            with os.scandir(directory) as scan:
                entries = []
                for entry in scan:
                    self.result.entries += 1
                    if self.result.entries > self.max_entries:
                        self.result.capped = (f"stopped after {self.max_entries} directory entries under "
                                              f"{directory}: narrow the log globs")
                        break
                    entries.append(entry)
        except PermissionError:
            self.result.unreadable.append(f"{directory}: permission denied")
            return []
        except FileNotFoundError:
            return []
        except OSError as exc:
            self.result.unreadable.append(f"{directory}: {exc.strerror or exc}")
            return []
        return sorted(entries, key=lambda e: e.name)

    def first_visit(self, directory: str) -> bool:
        try:
            info = os.stat(directory)
        except OSError:
            return False
        key = (info.st_dev, info.st_ino)
        if key in self.visited:
            return False
        self.visited.add(key)
        return True

    def walk(self, directory: str, segments: tuple[str, ...], depth: int) -> None:
        if not segments or self.result.capped:
            return
        head, rest = segments[0], segments[1:]
        if head == "**":
            # Zero directories, then one more level down (real directories only, each once).
            self.walk(directory, rest, depth)
            if depth >= self.max_depth:
                return
            for entry in self.list_dir(directory):
                if (entry.name.startswith(".") and not self.hidden) or not entry.is_dir(follow_symlinks=False):
                    continue
                if self.first_visit(entry.path):
                    self.walk(entry.path, segments, depth + 1)
            return
        for entry in self.list_dir(directory):
            if not _matches(entry.name, head, self.hidden):
                continue
            if not rest:
                if _is_regular_file(entry):
                    self.result.files.append(entry.path)
            elif _is_dir(entry):  # a fixed-depth step may cross a symlink: the pattern bounds it
                self.walk(entry.path, rest, depth + 1)


def _is_regular_file(entry: os.DirEntry[str]) -> bool:
    try:
        return stat.S_ISREG(entry.stat(follow_symlinks=True).st_mode)
    except OSError:
        return False


def _is_dir(entry: os.DirEntry[str]) -> bool:
    try:
        return entry.is_dir(follow_symlinks=True)
    except OSError:
        return False


def walk_matches(root: str, pattern: str, *, max_entries: int = MAX_ENTRIES, max_depth: int = MAX_DEPTH,
                 result: WalkResult | None = None, hidden: bool = False) -> WalkResult:
    """Regular files under ``root`` matching the relative glob ``pattern`` (``*``, ``?``, ``[..]``, ``**``).

    Pass the same ``result`` to several calls to share one entry budget across them. ``hidden`` lets
    wildcards match hidden names too (a directory handed over whole, not a glob of the agent's).
    """
    result = result if result is not None else WalkResult()
    segments = tuple(part for part in pattern.replace(os.sep, "/").split("/") if part and part != ".")
    walker = _Walker(max_entries, max_depth, result, hidden)
    walker.first_visit(root)
    walker.walk(root, segments, 0)
    return result
