"""Read the node's tools: each call is a collector's ``Source`` (its argv) run for one chip or the node.

``NodeReader`` is what the commands ask of a backend; ``ToolReader`` is the backend that runs npu-smi
and hccn_tool through ``agent.core.tool_runner``. A tool that hangs is killed at its timeout and
remembered: every later call to the same tool is skipped at once, so a wedged npu-smi or hccn_tool
costs one timeout, not one per chip. A missing tool is looked for once, and every call to it gives the
same error, whichever of the calls running side by side looked first.

With a ``RecordReader`` (the DCMI backend, ``open_reader``), the sources it serves are read through it
first, as the agent reads them, and the tool serves a reading it cannot (``Fallback``), the same
per-reading fallback as the collection's (``agent.core.collect``). A helper that fails (hangs, dies,
is busy) is given up on for the rest of the command: one call deadline, not one per chip. ``close()``
ends the helper ``open_reader`` started.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Protocol

from agent.core.backend import Fallback, RecordReader
from agent.core.tool_runner import ToolCannotRun, ToolFailed, ToolMissing, ToolTimeout, resolve_tool, run_tool
from agent.health.readings import Reading
from collectors.base import ChipRef, NoData, ParseError, Source

if TYPE_CHECKING:
    from agent.core.config import Config

__all__ = ["HCCN_PARALLEL", "NodeReader", "ToolReader", "as_text", "open_reader"]

HCCN_PARALLEL = 4  # hccn_tool calls at once (it has no max_parallel setting of its own)

TextParse = Callable[[str], Any]


def as_text(text: str) -> str:
    """A ``parse`` that keeps the tool's text as it printed it (``npuwatch bundle`` stores it)."""
    return text


class NodeReader(Protocol):
    """Reads one collector ``Source`` for one chip (``chip=None``: a node-wide source).

    ``Reading.value`` is what ``parse`` makes of the answer (default: the Source's own parser). ``parse``
    only tells a backend that reads text how to turn it into records; a backend that asks the driver
    directly returns the records of the same type: the Source's sequence for the Source's parser, its
    one record for another (a chip-bound ``parse(text, chip)``, ``npu_smi_info.parse``), and never for
    ``as_text``, which wants the tool's own words. A reading never raises: problems are
    ``Reading.error`` texts.
    """

    @property
    def parallelism(self) -> int:
        """Calls that may usefully run at once over all tools; 0 for a reader that answers at once, without a
        tool (its calls then run in the caller's thread: ``agent.health.node.calls_pool``)."""
        ...

    @property
    def max_chips(self) -> int:
        """The most chips an ``npu-smi info`` table may list (``collectors.npu_smi.max_chips``, as the agent
        refuses a longer one)."""
        ...

    def read(self, source: Source, chip: ChipRef | None = None, parse: TextParse | None = None) -> Reading:
        ...

    def hung(self) -> list[str]:
        """Why each tool that hung was given up on."""
        ...


class ToolReader:
    """Runs npu-smi and hccn_tool with the configured paths, timeouts and parallelism; remembers a tool
    that hung or is missing."""

    def __init__(self, config: Config, env: Mapping[str, str] | None = None, records: RecordReader | None = None,
                 *, owns: Callable[[], None] | None = None) -> None:
        collectors = config.collectors
        self._settings = {
            "npu-smi": (collectors.npu_smi.path, float(collectors.npu_smi.timeout),
                        int(collectors.npu_smi.max_parallel)),
            "hccn_tool": (collectors.hccn_tool.path, float(collectors.hccn_tool.timeout), HCCN_PARALLEL),
        }
        self._env = dict(env) if env else None
        self._max_chips = int(collectors.npu_smi.max_chips)
        self._lock = threading.Lock()
        self._paths: dict[str, str] = {}
        self._broken: dict[str, str] = {}  # tool -> why later calls are skipped
        self._missing: dict[str, str] = {}  # tool -> the error every call to it gives
        self._hung: dict[str, str] = {}  # tool -> the call that hung
        self._gates = {tool: threading.Semaphore(max(1, limit))
                       for tool, (_, _, limit) in self._settings.items()}
        self.records = records
        self._records_down: str | None = None  # why the record backend is no longer asked
        self._close = owns
        self.served: dict[str, int] = {}  # readings served by the record backend ("dcmi") and by the tool

    def close(self) -> None:
        """End what ``open_reader`` started (the DCMI helper); the reader then reads through the tools."""
        with self._lock:
            close, self._close = self._close, None
            self.records = None
        if close is not None:
            close()

    def __enter__(self) -> ToolReader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def backend_down(self) -> str | None:
        """Why the record backend was given up on in this command (its helper hung, died, was busy), if it was."""
        with self._lock:
            return self._records_down

    def _backend(self, source: Source) -> RecordReader | None:
        with self._lock:
            records = self.records
            if records is None or self._records_down is not None:
                return None
        return records if records.serves(source) else None

    def _path(self, tool: str) -> str:
        with self._lock:
            if tool not in self._paths:
                self._paths[tool] = resolve_tool(tool, self._settings[tool][0])
            return self._paths[tool]

    def skipped(self) -> list[str]:
        """Why each tool given up on is skipped (``hccn_tool hung earlier (...)``, ``npu-smi not found``)."""
        with self._lock:
            return list(self._broken.values())

    @property
    def parallelism(self) -> int:
        """Calls that may run at once over all tools (each tool has its own limit)."""
        return sum(limit for _, _, limit in self._settings.values())

    @property
    def max_chips(self) -> int:
        return self._max_chips

    def hung(self) -> list[str]:
        """Why each tool that hung was given up on (``hccn_tool -i 0 -link -g: no answer within 5s``)."""
        with self._lock:
            return list(self._hung.values())

    def read(self, source: Source, chip: ChipRef | None = None, parse: TextParse | None = None) -> Reading:
        """The record backend's records when it serves ``source`` (not for ``as_text``), else (or when it
        falls back) ``source``'s argv run for ``chip`` and its stdout parsed; never raises."""
        fallback = ""
        if parse is not as_text:
            direct = self.read_direct(source, chip, one=parse is not None and parse is not source.parse)
            if direct is not None and direct.ok:
                return direct
            if direct is not None:
                fallback = f" (after {direct.error})"
        reading = self._read_tool(source, chip, parse)
        if fallback and not reading.ok:
            return Reading(error=f"{reading.error}{fallback}", at=reading.at)
        if reading.ok:
            self._count("tool")
        return reading

    def read_direct(self, source: Source, chip: ChipRef | None = None, *, one: bool = False) -> Reading | None:
        """The record backend's reading of ``source`` (its Source's sequence, or ``one`` record), without the
        tool; None when no backend serves it (none, given up on, or not this source)."""
        records = self._backend(source)
        if records is None:
            return None
        name = getattr(records, "name", "backend")
        try:
            value = records.read(source, chip)
        except Fallback as exc:
            if exc.helper:
                with self._lock:
                    self._records_down = self._records_down or f"{name}: {exc}"
            return Reading(error=f"{name}: {exc}", at=time.monotonic())
        except (ParseError, NoData) as exc:
            return Reading(error=f"{name}: {exc}", at=time.monotonic())
        if one:
            if not isinstance(value, (list, tuple)) or len(value) != 1:
                return Reading(error=f"{name}: {source.name}: not one record", at=time.monotonic())
            value = value[0]
        self._count(name)
        return Reading(value=value, at=time.monotonic(), by=name)

    def _count(self, backend: str) -> None:
        with self._lock:
            self.served[backend] = self.served.get(backend, 0) + 1

    def _read_tool(self, source: Source, chip: ChipRef | None, parse: TextParse | None) -> Reading:
        tool = source.tool
        args = source.argv(chip)
        parse = source.parse if parse is None else parse
        shown = " ".join([tool, *args])
        given_up = self._given_up(tool, shown)
        if given_up is not None:
            return Reading(error=given_up, at=time.monotonic())
        timeout = self._settings[tool][1]
        try:
            path = self._path(tool)
            with self._gates[tool]:
                given_up = self._given_up(tool, shown)  # it may have hung while this call waited for its turn
                if given_up is not None:
                    return Reading(error=given_up, at=time.monotonic())
                result = run_tool([path, *args], timeout, env=self._env)
            return Reading(value=parse(result.stdout), at=time.monotonic())
        except ToolCannotRun as exc:  # there, but exec refuses it: say why, not "not found"
            error = str(exc)
            self._mark(tool, f"{tool} cannot be executed ({exc})")
            return Reading(error=error, at=time.monotonic())
        except ToolMissing:
            error = f"{tool}: not found (set collectors.{_key(tool)}.path)"
            with self._lock:
                self._missing.setdefault(tool, error)
            self._mark(tool, f"{tool} not found")
            return Reading(error=error, at=time.monotonic())
        except ToolTimeout:
            error = f"{shown}: no answer within {timeout:g}s (killed)"
            self._mark(tool, f"{tool} hung earlier ({shown})", hung=error)
            return Reading(error=error, at=time.monotonic())
        except ToolFailed as exc:
            return Reading(error=f"{shown}: {exc}", at=time.monotonic())
        except (ParseError, ValueError) as exc:
            return Reading(error=f"{shown}: unreadable output: {exc}", at=time.monotonic())

    def _given_up(self, tool: str, shown: str) -> str | None:
        """The error of a call to a tool given up on (missing, or hung earlier), without running it."""
        with self._lock:
            missing = self._missing.get(tool)
            why = self._broken.get(tool)
        if missing is not None:
            return missing
        return None if why is None else f"{shown}: skipped, {why}"

    def _mark(self, tool: str, why: str, hung: str | None = None) -> None:
        with self._lock:
            self._broken.setdefault(tool, why)
            if hung is not None:
                self._hung.setdefault(tool, hung)


def _key(tool: str) -> str:
    return tool.replace("-", "_")


def open_reader(config: Config, env: Mapping[str, str] | None = None, *,
                call_timeout: float | None = None) -> ToolReader:
    """The commands' reader: DCMI first where ``collectors.dcmi`` finds the library (as the agent chooses,
    ``agent.dcmi.setup``), the tools for the rest and as the fallback. Close it (or use ``with``): that ends
    the helper. ``call_timeout`` bounds each DCMI call and the helper's start (default the config's)."""
    from agent.dcmi.setup import open_backend

    backend = open_backend(config, env, call_timeout=call_timeout)
    if backend is None:
        return ToolReader(config, env)
    return ToolReader(config, env, backend, owns=backend.client.close)
