"""Read the node's tools: each call is a collector's ``Source`` (its argv) run for one chip or the node.

``NodeReader`` is what the commands ask of a backend; ``ToolReader`` is the backend that runs npu-smi
and hccn_tool through ``agent.core.tool_runner``. A tool that hangs is killed at its timeout and
remembered: every later call to the same tool is skipped at once, so a wedged npu-smi or hccn_tool
costs one timeout, not one per chip.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping
from typing import Any, Protocol

from agent.core.tool_runner import ToolFailed, ToolMissing, ToolTimeout, resolve_tool, run_tool
from agent.health.readings import Reading
from collectors.base import ChipRef, ParseError, Source

__all__ = ["HCCN_PARALLEL", "NodeReader", "ToolReader", "as_text"]

HCCN_PARALLEL = 4  # hccn_tool calls at once (it has no max_parallel setting of its own)

TextParse = Callable[[str], Any]


def as_text(text: str) -> str:
    """A ``parse`` that keeps the tool's text as it printed it (``npuwatch bundle`` stores it)."""
    return text


class NodeReader(Protocol):
    """Reads one collector ``Source`` for one chip (``chip=None``: a node-wide source).

    ``Reading.value`` is what ``parse`` makes of the answer (default: the Source's own parser). ``parse``
    only tells a backend that reads text how to turn it into records; a backend that asks the driver
    directly returns the records of the same type. A reading never raises: problems are
    ``Reading.error`` texts.
    """

    @property
    def parallelism(self) -> int:
        """Calls that may usefully run at once over all tools."""
        ...

    def read(self, source: Source, chip: ChipRef | None = None, parse: TextParse | None = None) -> Reading:
        ...

    def hung(self) -> list[str]:
        """Why each tool that hung was given up on."""
        ...


class ToolReader:
    """Runs npu-smi and hccn_tool with the configured paths, timeouts and parallelism; remembers a tool
    that hung or is missing."""

    def __init__(self, config: Any, env: Mapping[str, str] | None = None) -> None:
        collectors = config.collectors
        self._settings = {
            "npu-smi": (collectors.npu_smi.path, float(collectors.npu_smi.timeout),
                        int(collectors.npu_smi.max_parallel)),
            "hccn_tool": (collectors.hccn_tool.path, float(collectors.hccn_tool.timeout), HCCN_PARALLEL),
        }
        self._env = dict(env) if env else None
        self._lock = threading.Lock()
        self._paths: dict[str, str] = {}
        self._broken: dict[str, str] = {}  # tool -> why later calls are skipped
        self._hung: dict[str, str] = {}  # tool -> the call that hung
        self._gates = {tool: threading.Semaphore(max(1, limit))
                       for tool, (_, _, limit) in self._settings.items()}

    def _path(self, tool: str) -> str:
        with self._lock:
            if tool not in self._paths:
                self._paths[tool] = resolve_tool(tool, self._settings[tool][0])
            return self._paths[tool]

    def broken(self, tool: str) -> str | None:
        with self._lock:
            return self._broken.get(tool)

    def skipped(self) -> list[str]:
        """Why each tool given up on is skipped (``hccn_tool hung earlier (...)``, ``npu-smi not found``)."""
        with self._lock:
            return list(self._broken.values())

    @property
    def parallelism(self) -> int:
        """Calls that may run at once over all tools (each tool has its own limit)."""
        return sum(limit for _, _, limit in self._settings.values())

    def hung(self) -> list[str]:
        """Why each tool that hung was given up on (``hccn_tool -i 0 -link -g: no answer within 5s``)."""
        with self._lock:
            return list(self._hung.values())

    def read(self, source: Source, chip: ChipRef | None = None, parse: TextParse | None = None) -> Reading:
        """Run ``source``'s argv for ``chip`` and parse its stdout; never raises for tool or parse problems."""
        tool = source.tool
        args = source.argv(chip)
        parse = source.parse if parse is None else parse
        shown = " ".join([tool, *args])
        skipped = self.broken(tool)
        if skipped is not None:
            return Reading(error=f"{shown}: skipped, {skipped}", at=time.monotonic())
        timeout = self._settings[tool][1]
        try:
            path = self._path(tool)
            with self._gates[tool]:
                skipped = self.broken(tool)  # it may have hung while this call waited for its turn
                if skipped is not None:
                    return Reading(error=f"{shown}: skipped, {skipped}", at=time.monotonic())
                result = run_tool([path, *args], timeout, env=self._env)
            return Reading(value=parse(result.stdout), at=time.monotonic())
        except ToolMissing:
            self._mark(tool, f"{tool} not found")
            return Reading(error=f"{tool}: not found (set collectors.{_key(tool)}.path)", at=time.monotonic())
        except ToolTimeout:
            error = f"{shown}: no answer within {timeout:g}s (killed)"
            self._mark(tool, f"{tool} hung earlier ({shown})", hung=error)
            return Reading(error=error, at=time.monotonic())
        except ToolFailed as exc:
            return Reading(error=f"{shown}: {exc}", at=time.monotonic())
        except (ParseError, ValueError) as exc:
            return Reading(error=f"{shown}: unreadable output: {exc}", at=time.monotonic())

    def _mark(self, tool: str, why: str, hung: str | None = None) -> None:
        with self._lock:
            self._broken.setdefault(tool, why)
            if hung is not None:
                self._hung.setdefault(tool, hung)


def _key(tool: str) -> str:
    return tool.replace("-", "_")
