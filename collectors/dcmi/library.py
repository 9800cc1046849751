"""Find ``libdcmi.so`` and refuse a copy that someone other than root could have put there.

The agent loads the library into a process that runs as root on most nodes, so a library file an
unprivileged user can replace is a way to run code as root. The rules are npu-exporter's
(shared/reference/README.md, "dcmi/"):

- search each directory of ``LD_LIBRARY_PATH``, then what ``ldconfig -p`` lists, then the two places
  the driver installs it (``/usr/local/dcmi``, ``/usr/local/Ascend/driver/lib64/driver``);
- a candidate is used when its real path (symlinks resolved) is a regular file that root owns and
  that neither group nor others may write, and the same holds for every directory above it; a
  refused candidate is reported in one line naming the path and why, and the search goes on.

A path configured by hand (``collectors.dcmi.library``) is used as given, without a search: an owner
other than root or a group-writable file or directory only earns a warning, since the operator chose
it. But a path any user could replace (the file, or a directory above it, writable by others; a
directory with the sticky bit, such as ``/tmp``, lets no one replace what another user owns in it) is
refused unless ``collectors.dcmi.allow_writable_library`` is true. The file-system checks go through
``FileSystem``, so the tests state ownership and modes instead of needing to be a non-root user.
``ldconfig -p`` is run by the caller (``agent.dcmi.locate``, through the tool runner) and passed in
as a function, which keeps this module free of processes.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Protocol

__all__ = [
    "LIBRARY_NAME",
    "STANDARD_DIRS",
    "FileFacts",
    "FileSystem",
    "Found",
    "LibraryNotFound",
    "OsFileSystem",
    "candidates",
    "find_library",
    "ldconfig_paths",
    "vet",
]

LIBRARY_NAME = "libdcmi.so"
STANDARD_DIRS = ("/usr/local/dcmi", "/usr/local/Ascend/driver/lib64/driver")


@dataclass(frozen=True)
class FileFacts:
    """What the checks need to know of one path."""

    uid: int
    mode: int  # st_mode: type and permission bits

    @property
    def is_file(self) -> bool:
        return stat.S_ISREG(self.mode)

    @property
    def is_dir(self) -> bool:
        return stat.S_ISDIR(self.mode)


class FileSystem(Protocol):
    def real_path(self, path: str) -> str: ...

    def facts(self, path: str) -> FileFacts | None:
        """None when nothing is at ``path``."""


class OsFileSystem:
    """The real file system."""

    def real_path(self, path: str) -> str:
        return os.path.realpath(path)

    def facts(self, path: str) -> FileFacts | None:
        try:
            info = os.stat(path)
        except OSError:
            return None
        return FileFacts(uid=info.st_uid, mode=info.st_mode)


class LibraryNotFound(Exception):
    """No usable ``libdcmi.so``; ``refused`` lists each candidate turned down, one line each."""

    def __init__(self, message: str, refused: Sequence[str] = ()) -> None:
        self.refused = tuple(refused)
        detail = "".join(f"; {line}" for line in self.refused)
        super().__init__(message + detail)


@dataclass(frozen=True)
class Found:
    """The library to load; ``warnings`` about a configured path, ``refused`` candidates passed over."""

    path: str
    configured: bool
    warnings: tuple[str, ...] = ()
    refused: tuple[str, ...] = ()


def _problem(path: str, facts: FileFacts, what: str) -> str | None:
    if facts.uid != 0:
        return f"{path}: {what} is owned by uid {facts.uid}, not root"
    if facts.mode & (stat.S_IWGRP | stat.S_IWOTH):
        return f"{path}: {what} is writable by group or others (mode {stat.S_IMODE(facts.mode):04o})"
    return None


def vet(path: str, fs: FileSystem) -> tuple[str | None, str | None]:
    """(real path, None) when ``path`` may be loaded, else (None, the one-line reason)."""
    real = fs.real_path(path)
    facts = fs.facts(real)
    if facts is None:
        return None, f"{path}: not found"
    if not facts.is_file:
        return None, f"{real}: not a regular file"
    shown = real if real == path else f"{path} -> {real}"
    problem = _problem(shown, facts, "the file")
    if problem:
        return None, problem
    directory = os.path.dirname(real)
    while True:
        dir_facts = fs.facts(directory)
        if dir_facts is None or not dir_facts.is_dir:
            return None, f"{directory}: not a directory"
        problem = _problem(directory, dir_facts, "the directory")
        if problem:
            return None, f"{shown}: {problem}"
        parent = os.path.dirname(directory)
        if parent == directory:
            return real, None
        directory = parent


def ldconfig_paths(text: str) -> list[str]:
    """The ``libdcmi.so`` paths in ``ldconfig -p`` output (``\\tlibdcmi.so (libc6,x86-64) => /path``)."""
    paths = []
    for line in text.splitlines():
        name, arrow, path = line.strip().partition(" => ")
        if arrow and name.split(" ", 1)[0] == LIBRARY_NAME and path.startswith("/"):
            paths.append(path.strip())
    return paths


def candidates(ld_library_path: str | None, ldconfig_output: str) -> list[str]:
    """Where to look, in order, each path once."""
    found: list[str] = []
    dirs: Iterable[str] = (part for part in (ld_library_path or "").split(":") if part)
    for path in (
        *(os.path.join(directory, LIBRARY_NAME) for directory in dirs),
        *ldconfig_paths(ldconfig_output),
        *(os.path.join(directory, LIBRARY_NAME) for directory in STANDARD_DIRS),
    ):
        if path not in found:
            found.append(path)
    return found


def find_library(
    configured: str | None = None,
    *,
    allow_writable: bool = False,
    ld_library_path: str | None = None,
    ldconfig: Callable[[], str] = lambda: "",
    fs: FileSystem | None = None,
) -> Found:
    """The library to load. Raises ``LibraryNotFound`` (every refusal in its message) when none will do.

    ``ldconfig`` returns ``ldconfig -p`` output (it is called only when no configured path is given;
    "" when ldconfig is missing or fails); ``ld_library_path`` is the value of ``LD_LIBRARY_PATH``.
    ``allow_writable``: load a configured path even when any user could replace it.
    """
    fs = fs or OsFileSystem()
    if configured:
        return _configured(configured, fs, allow_writable)
    refused: list[str] = []
    for path in candidates(ld_library_path, ldconfig()):
        real, reason = vet(path, fs)
        if real is not None:
            return Found(path=real, configured=False, refused=tuple(refused))
        if not reason or not reason.endswith(": not found"):
            refused.append(reason or path)
    raise LibraryNotFound(f"{LIBRARY_NAME} not found (LD_LIBRARY_PATH, ldconfig -p, {', '.join(STANDARD_DIRS)})",
                          refused)


def _replaceable(real: str, facts: FileFacts, fs: FileSystem) -> str | None:
    """Why any user could put another library at ``real`` (None: only its owners could)."""
    if facts.mode & stat.S_IWOTH:
        return f"{real} is writable by any user (mode {stat.S_IMODE(facts.mode):04o})"
    directory = os.path.dirname(real)
    while True:
        dir_facts = fs.facts(directory)
        if dir_facts is not None and dir_facts.mode & stat.S_IWOTH and not dir_facts.mode & stat.S_ISVTX:
            return f"{directory} is writable by any user (mode {stat.S_IMODE(dir_facts.mode):04o})"
        parent = os.path.dirname(directory)
        if parent == directory:
            return None
        directory = parent


def _configured(path: str, fs: FileSystem, allow_writable: bool) -> Found:
    real = fs.real_path(path)
    facts = fs.facts(real)
    if facts is None or not facts.is_file:
        raise LibraryNotFound(f"{path}: configured as collectors.dcmi.library, but no such file")
    danger = _replaceable(real, facts, fs)
    if danger is not None and not allow_writable:
        raise LibraryNotFound(f"{path}: refused as collectors.dcmi.library: {danger}, so anyone could run code in "
                              "the agent (set collectors.dcmi.allow_writable_library: true to load it anyway)")
    _, reason = vet(path, fs)
    warnings = () if reason is None else (f"{reason} (used anyway: configured as collectors.dcmi.library)",)
    return Found(path=real, configured=True, warnings=warnings)
