"""Where the agent's ``libdcmi.so`` is: ``collectors.dcmi.library``'s search, with ``ldconfig -p`` run
through the tool runner (argv list, timeout, process group killed on overrun)."""

from __future__ import annotations

import os

from agent.core.tool_runner import ToolFailed, ToolMissing, ToolTimeout, resolve_tool, run_tool
from collectors.dcmi.library import FileSystem, Found, find_library

__all__ = ["ldconfig_output", "locate_library"]

LDCONFIG_DIRS = ("/sbin", "/usr/sbin", "/usr/local/sbin")


def ldconfig_output(timeout_s: float = 5.0) -> str:
    """``ldconfig -p``, or "" when ldconfig is missing, fails or hangs (the search goes on without it)."""
    try:
        argv = [resolve_tool("ldconfig", search_dirs=LDCONFIG_DIRS), "-p"]
        return run_tool(argv, timeout_s).stdout
    except (ToolMissing, ToolFailed, ToolTimeout):
        return ""


def locate_library(configured: str | None = None, *, allow_writable: bool = False, timeout_s: float = 5.0,
                   fs: FileSystem | None = None) -> Found:
    """The vetted library (``LibraryNotFound`` when there is none that may be loaded)."""
    return find_library(configured, allow_writable=allow_writable, ld_library_path=os.environ.get("LD_LIBRARY_PATH"),
                        ldconfig=lambda: ldconfig_output(timeout_s), fs=fs)
