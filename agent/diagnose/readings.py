"""Read the node once for ``npuwatch diagnose``: every tool call through ``agent.core.tool_runner``, a few at a time.

A tool that hangs is killed at its timeout and remembered: every later call to the same tool is
skipped at once, so a wedged npu-smi or hccn_tool costs one timeout, not one per chip."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

from agent.core.humanize import duration
from agent.core.tool_runner import ToolFailed, ToolMissing, ToolTimeout, resolve_tool, run_tool
from agent.diagnose.results import HCCN_PARALLEL
from agent.health.readings import LogScan, NodeReadings, Reading, RoceReadings
from collectors import (
    hccn_ip,
    hccn_link,
    hccn_link_stat,
    hccn_net_health,
    hccn_optical,
    hccn_stat,
    npu_smi_ecc,
    npu_smi_health,
    npu_smi_info,
    npu_smi_mapping,
)
from collectors.base import ChipRef, ParseError
from collectors.hccn_link import device_id
from collectors.npu_smi_kv import chip_argv

# ----------------------------------------------------------------------------- tools


class ToolBox:
    """Runs npu-smi and hccn_tool for diagnose; remembers a tool that hung or is missing."""

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

    @property
    def parallelism(self) -> int:
        """Calls that may run at once over all tools (each tool has its own limit)."""
        return sum(limit for _, _, limit in self._settings.values())

    def hung(self) -> list[str]:
        """Why each tool that hung was given up on (``hccn_tool hung earlier (...)``)."""
        with self._lock:
            return list(self._hung.values())

    def read(self, tool: str, args: Sequence[str], parse: Callable[[str], Any]) -> Reading:
        """Run ``tool args`` and parse its stdout; never raises for tool or parse problems."""
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


# ----------------------------------------------------------------------------- reading the node


def _quiet(_text: str) -> None:
    """Progress nobody watches."""


def read_node(tools: ToolBox, gap_s: float, scan_logs: Callable[[], LogScan] | None = None,
              say: Callable[[str], None] = _quiet) -> NodeReadings:
    """Run every tool call diagnose needs: the chip list first, then per-chip reads in parallel.

    Optics and packet counters are read twice, ``gap_s`` apart, to see counters rise. ``say``
    hears what is going on (``12/80 npu-smi and hccn_tool calls``), for a progress line.
    """
    # One thread per allowed tool call plus the log scan: a call waiting for its tool's turn
    # never holds up a call to the other tool.
    with ThreadPoolExecutor(max_workers=tools.parallelism + 1, thread_name_prefix="diagnose") as pool:
        logs_future = pool.submit(scan_logs) if scan_logs is not None else None
        say("npu-smi info")
        table = tools.read("npu-smi", ["info"], npu_smi_info.parse)
        readings = NodeReadings(table=table)
        if table.ok:
            mapping = tools.read("npu-smi", ["info", "-m"], npu_smi_mapping.parse)
            readings.chips = npu_smi_info.chip_refs(table.value, mapping.value if mapping.ok else None)
            _read_chips(tools, pool, readings, gap_s, _CallCounter(say))
        if logs_future is not None:
            say("reading the HCCL/CANN logs")
            readings.logs = logs_future.result()
    return readings


class _CallCounter:
    """Counts tool calls as they finish and says how far the reading is."""

    def __init__(self, say: Callable[[str], None]) -> None:
        self.say = say
        self._lock = threading.Lock()
        self.done = 0
        self.total = 0

    def add(self, future: Future[Reading]) -> Future[Reading]:
        with self._lock:
            self.total += 1
        future.add_done_callback(self._finished)
        return future

    def _finished(self, _future: Future[Reading]) -> None:
        with self._lock:
            self.done += 1
            text = f"{self.done}/{self.total} npu-smi and hccn_tool calls"
        self.say(text)


def _read_chips(tools: ToolBox, pool: ThreadPoolExecutor, readings: NodeReadings, gap_s: float,
                calls: _CallCounter) -> None:
    def npu_smi(ref: ChipRef, kind: str, parse: Callable[[str, int | None], Any]) -> Future[Reading]:
        return calls.add(pool.submit(tools.read, "npu-smi", chip_argv(kind, ref),
                                     lambda text: parse(text, ref.chip)))

    def hccn(ref: ChipRef, command: str, parse: Callable[[str], Any]) -> Future[Reading]:
        return calls.add(pool.submit(tools.read, "hccn_tool", ["-i", str(device_id(ref)), f"-{command}", "-g"],
                                     parse))

    health = {ref: npu_smi(ref, "health", npu_smi_health.parse) for ref in readings.chips}
    ecc = {ref: npu_smi(ref, "ecc", npu_smi_ecc.parse) for ref in readings.chips}
    first = {
        ref: {
            "optical": hccn(ref, "optical", hccn_optical.parse),
            "stat": hccn(ref, "stat", hccn_stat.parse),
            "link": hccn(ref, "link", hccn_link.parse),
            "link_stat": hccn(ref, "link_stat", hccn_link_stat.parse),
            "net_health": hccn(ref, "net_health", hccn_net_health.parse),
            "ip": hccn(ref, "ip", hccn_ip.parse),
        }
        for ref in readings.chips
    }
    done_first = {ref: {name: future.result() for name, future in calls.items()}
                  for ref, calls in first.items()}
    sampled = [r[name] for r in done_first.values() for name in ("optical", "stat") if r[name].ok]
    second: dict[ChipRef, dict[str, Future[Reading]]] = {}
    if sampled:  # no second round when no port answered the first
        wait = gap_s - (time.monotonic() - min(reading.at for reading in sampled))
        if wait > 0:
            calls.say(f"waiting {duration(wait)} for the second optics and counter sample")
            time.sleep(wait)
        second = {
            ref: {"optical": hccn(ref, "optical", hccn_optical.parse),
                  "stat": hccn(ref, "stat", hccn_stat.parse)}
            for ref, r in done_first.items() if r["optical"].ok or r["stat"].ok
        }
    for ref, r in done_first.items():
        again = {name: future.result() for name, future in second.get(ref, {}).items()}
        readings.roce[ref] = RoceReadings(
            link=r["link"], link_stat=r["link_stat"], net_health=r["net_health"], ip=r["ip"],
            optical=[r["optical"], *([again["optical"]] if "optical" in again else [])],
            stat=[r["stat"], *([again["stat"]] if "stat" in again else [])],
        )
    readings.health = {ref: future.result() for ref, future in health.items()}
    readings.ecc = {ref: future.result() for ref, future in ecc.items()}


