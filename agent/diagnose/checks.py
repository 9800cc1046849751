"""The checks of ``npuwatch diagnose``: read the node once, judge each area, name local causes.

Reading and judging are separate. ``read_node`` runs every tool call (through
``agent.core.tool_runner.run_tool``, with the configured timeouts, a few at a time) and returns
``NodeReadings``; the ``check_*`` functions are pure over those readings and return a ``Check``
(status, evidence, hint) whose ``findings`` are the local causes the verdict ranks.

A tool that hangs is killed at its timeout and remembered: every later call to the same tool is
skipped at once, so a wedged npu-smi or hccn_tool costs one timeout, not one per chip.
"""

from __future__ import annotations

import contextlib
import ipaddress
import os
import re
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agent.core.tool_runner import ToolFailed, ToolMissing, ToolTimeout, resolve_tool, run_tool
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
from collectors.hccl_classify import Event, StreamClassifier
from collectors.hccl_tail import DEFAULT_GLOBS, LogTailer, split_complete_lines
from collectors.hccn_link import device_id
from collectors.npu_smi_kv import chip_argv

__all__ = [
    "CAUSES",
    "FAIL",
    "PASS",
    "UNKNOWN",
    "WARN",
    "Check",
    "Finding",
    "LogScan",
    "NodeReadings",
    "Reading",
    "ToolBox",
    "check_chips",
    "check_ecc",
    "check_flaps",
    "check_ip_config",
    "check_link",
    "check_logs",
    "check_net_health",
    "check_optics",
    "check_packet_errors",
    "read_node",
    "remote_culprit",
    "scan_recent_logs",
    "worst",
]

PASS, WARN, FAIL, UNKNOWN = "PASS", "WARN", "FAIL", "UNKNOWN"
_SEVERITY = {PASS: 0, UNKNOWN: 1, WARN: 2, FAIL: 3}

# Local causes, most convincing explanation of an HCCL timeout first (the verdict's order),
# each with what it is called in the verdict and what to do about it.
CAUSES: dict[str, tuple[str, str]] = {
    "link_down": ("RoCE link down",
                  "check the cable or optical module and the switch port of this NPU "
                  "(hccn_tool -i N -optical -g, -link_stat -g)"),
    "link_flapping": ("RoCE link flapping",
                      "a flapping port breaks HCCL links mid-job: reseat or replace the optical module/cable "
                      "and check the switch port's error counters"),
    "optics_no_light": ("optical module receives no light",
                        "the fibre is unplugged or broken, or the far-end module is off: clean, reseat or "
                        "swap the module and fibre"),
    "net_health": ("RoCE network health check failing",
                   "the port cannot reach its detect address: check netdetect/gateway in hccn.conf and the "
                   "switch or VLAN path"),
    "ecc_double_bit": ("HBM double-bit ECC errors",
                       "uncorrectable HBM errors: drain the node, reset the chip, replace it if they return"),
    "chip_unhealthy": ("unhealthy chip",
                       "look up the error codes (npu-smi info -t health -i N) and dmesg; reset or replace "
                       "the chip"),
    "chip_missing": ("chip missing from npu-smi",
                     "npu-smi no longer lists the chip: check dmesg and PCIe; a reboot or repair is needed"),
    "heartbeat_lost": ("device heartbeat lost (kernel log)",
                       "the driver lost the device: check dmesg around that time; reset or replace the chip"),
    "ip_mismatch": ("RoCE address differs from hccn.conf",
                    "the rank table uses the configured address: reapply it with hccn_tool -i N -ip -s ..."),
    "probe_failed": ("probe failed on this node",
                     "rerun `npuwatch probe ...` on this node alone; compare with a healthy node"),
    "packet_errors": ("RoCE packet errors rising",
                      "errors grew while diagnose watched: check optics, cable and the switch's PFC/ECN "
                      "settings"),
    "optics_weak": ("weak optical receive power",
                    "rx power is below the module's low threshold: clean the fibre ends, check the far end"),
    "link_down_recently": ("RoCE link went down recently",
                           "one outage in the window: if jobs failed then, that was why; watch for more"),
    "net_health_init": ("RoCE network health not configured",
                        "no detect address: set netdetect_N in hccn.conf (hccn_tool -i N -netdetect -s ...)"),
    "ecc_history": ("HBM pages isolated after ECC errors",
                    "pages were retired after earlier errors; plan a chip check if the count grows"),
    "chip_warning": ("chip health warning",
                     "look up the error codes (npu-smi info -t health -i N); usually not fatal"),
    "probe_degraded": ("probe below its warning threshold", "compare with a healthy node of the same model"),
}
CAUSE_ORDER = {name: index for index, name in enumerate(CAUSES)}

DEFAULT_WINDOW_S = 7200.0
DEFAULT_SAMPLE_GAP_S = 3.0
DEFAULT_LOG_TAIL_BYTES = 8 << 20  # per file: a few hours of a busy plog
NO_LIGHT_WATTS = 1e-5  # 0.01 mW (-20 dBm): below any receiver's sensitivity
FLAP_DOWNS = 2  # link-down events in the window that make a port "flapping"
HCCN_PARALLEL = 4

_IPV4_RE = re.compile(r"(?<![\d.])(\d{1,3}(?:\.\d{1,3}){3})(?![\d.])")
_RANK_KINDS = ("remote_rank", "crimer_rank", "dst_rank")
_IP_KINDS = ("exception_location", "dst_rank", "link_peer", "peer")
_TIMEOUT_CATEGORIES = frozenset({"exec_timeout", "connect_timeout", "rendezvous_timeout", "watchdog_timeout",
                                 "stream_sync_timeout", "heartbeat", "roce_cqe", "sdma"})


# ----------------------------------------------------------------------------- results


@dataclass(frozen=True, slots=True)
class Finding:
    """A local cause found by a check: what, where, and the evidence in one phrase."""

    cause: str  # a key of CAUSES
    status: str  # FAIL or WARN
    npu: int | None
    label: str  # "NPU 3" / "NPU 3 chip 1"
    detail: str  # "hccn_tool -i 3 -link -g says DOWN"

    @property
    def rank(self) -> int:
        return CAUSE_ORDER[self.cause]


@dataclass(frozen=True, slots=True)
class Check:
    name: str
    status: str
    evidence: str
    hint: str = ""
    device: int | None = None
    findings: tuple[Finding, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "status": self.status, "evidence": self.evidence, "hint": self.hint,
                "device": self.device}


def worst(statuses: Iterable[str]) -> str:
    return max(statuses, key=_SEVERITY.__getitem__, default=PASS)


@dataclass(frozen=True, slots=True)
class Reading:
    """One tool call: the parsed record, or why there is none; ``at`` is when it finished."""

    value: Any = None
    error: str | None = None
    at: float = 0.0

    @property
    def ok(self) -> bool:
        return self.error is None


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


@dataclass(slots=True)
class RoceReadings:
    link: Reading
    link_stat: Reading
    net_health: Reading
    ip: Reading
    optical: list[Reading]  # first and second sample
    stat: list[Reading]


@dataclass(slots=True)
class NodeReadings:
    """Everything diagnose read; ``table`` is an error Reading when npu-smi could not list chips."""

    table: Reading
    chips: list[ChipRef] = field(default_factory=list)
    health: dict[ChipRef, Reading] = field(default_factory=dict)
    ecc: dict[ChipRef, Reading] = field(default_factory=dict)
    roce: dict[ChipRef, RoceReadings] = field(default_factory=dict)
    logs: LogScan | None = None

    def multi_chip(self) -> bool:
        return any(ref.chip != 0 for ref in self.chips)

    def label(self, ref: ChipRef) -> str:
        return f"NPU {ref.npu} chip {ref.chip}" if self.multi_chip() else f"NPU {ref.npu}"


def read_node(tools: ToolBox, gap_s: float, scan_logs: Callable[[], LogScan] | None = None) -> NodeReadings:
    """Run every tool call diagnose needs: the chip list first, then per-chip reads in parallel.

    Optics and packet counters are read twice, ``gap_s`` apart, to see counters rise.
    """
    # One thread per allowed tool call plus the log scan: a call waiting for its tool's turn
    # never holds up a call to the other tool.
    with ThreadPoolExecutor(max_workers=tools.parallelism + 1, thread_name_prefix="diagnose") as pool:
        logs_future = pool.submit(scan_logs) if scan_logs is not None else None
        table = tools.read("npu-smi", ["info"], npu_smi_info.parse)
        readings = NodeReadings(table=table)
        if table.ok:
            mapping = tools.read("npu-smi", ["info", "-m"], npu_smi_mapping.parse)
            readings.chips = npu_smi_info.chip_refs(table.value, mapping.value if mapping.ok else None)
            _read_chips(tools, pool, readings, gap_s)
        if logs_future is not None:
            readings.logs = logs_future.result()
    return readings


def _read_chips(tools: ToolBox, pool: ThreadPoolExecutor, readings: NodeReadings, gap_s: float) -> None:
    def npu_smi(ref: ChipRef, kind: str, parse: Callable[[str, int | None], Any]) -> Future[Reading]:
        return pool.submit(tools.read, "npu-smi", chip_argv(kind, ref), lambda text: parse(text, ref.chip))

    def hccn(ref: ChipRef, command: str, parse: Callable[[str], Any]) -> Future[Reading]:
        return pool.submit(tools.read, "hccn_tool", ["-i", str(device_id(ref)), f"-{command}", "-g"], parse)

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


# ----------------------------------------------------------------------------- per-device judging


@dataclass(frozen=True, slots=True)
class _DeviceResult:
    npu: int | None
    status: str
    text: str
    finding: Finding | None = None


def _found(readings: NodeReadings, ref: ChipRef, cause: str, status: str, detail: str, *,
           text: str | None = None) -> _DeviceResult:
    label = readings.label(ref)
    finding = Finding(cause, status, ref.npu, label, detail)
    return _DeviceResult(ref.npu, status, f"{label}: {text or detail}", finding)


def _aggregate(name: str, results: Sequence[_DeviceResult], ok_text: str, default_hint: str = "") -> Check:
    """One check from per-device results: worst status, non-passing evidence first."""
    if not results:
        return Check(name, UNKNOWN, "no devices to check", default_hint)
    status = worst(r.status for r in results)
    if all(r.status == UNKNOWN for r in results):
        more = f" (and {len(results) - 1} more devices)" if len(results) > 1 else ""
        return Check(name, UNKNOWN, results[0].text + more, default_hint)
    ordered = sorted(results, key=lambda r: -_SEVERITY[r.status])
    shown = [r.text for r in ordered if r.status != PASS]
    evidence = "; ".join(shown) if shown else ok_text
    findings = tuple(sorted((r.finding for r in results if r.finding is not None),
                            key=lambda f: (-_SEVERITY[f.status], f.rank)))
    top = ordered[0]
    hint = CAUSES[findings[0].cause][1] if findings else default_hint
    device = top.npu if status != PASS else None
    return Check(name, status, evidence, hint if status != PASS else "", device, findings)


def _unknown(readings: NodeReadings, ref: ChipRef, reading: Reading) -> _DeviceResult:
    return _DeviceResult(ref.npu, UNKNOWN, f"{readings.label(ref)}: {reading.error}")


def _no_chips(name: str, readings: NodeReadings) -> Check | None:
    if readings.table.ok:
        return None
    return Check(name, UNKNOWN, f"no chip list: {readings.table.error}",
                 "npu-smi must answer first: run `npu-smi info` by hand and check dmesg for dcmi errors")


def check_chips(readings: NodeReadings, expected_chips: int = 0) -> Check:
    """Health word of each chip (``npu-smi info`` and ``-t health``) and its active error codes."""
    name = "npu_health"
    if (missing := _no_chips(name, readings)) is not None:
        return missing
    table = {(status.npu, status.chip): status for status in readings.table.value.chips}
    results: list[_DeviceResult] = []
    for ref in readings.chips:
        reading = readings.health.get(ref, Reading(error="not read"))
        record = reading.value if reading.ok else None
        printed = record.health if record is not None else None
        word = printed or table[(ref.npu, ref.chip)].health
        codes = list(record.error_codes) if record is not None else []
        state = npu_smi_info.health_state(word)
        detail = f"npu-smi says {word}" + (f", error codes {' '.join(codes)}" if codes else "")
        said = f"{' '.join(['npu-smi', *chip_argv('health', ref)])} says {word} {' '.join(codes)}".strip()
        if state == "ok" and not codes:
            results.append(_DeviceResult(ref.npu, PASS, f"{readings.label(ref)}: OK"))
        elif state in ("ok", "warning"):
            results.append(_found(readings, ref, "chip_warning", WARN, said, text=detail))
        else:
            results.append(_found(readings, ref, "chip_unhealthy", FAIL, said, text=detail))
    ok_text = f"{len(readings.chips)} chips OK, no error codes"
    if expected_chips and len(readings.chips) < expected_chips:
        text = f"npu-smi lists {len(readings.chips)} of {expected_chips} expected chips"
        finding = Finding("chip_missing", FAIL, None, "this node", text)
        results.append(_DeviceResult(None, FAIL, text, finding))
    return _aggregate(name, results, ok_text)


def check_ecc(readings: NodeReadings) -> Check:
    """HBM double-bit (uncorrectable) errors and isolated pages (``npu-smi info -t ecc``)."""
    name = "hbm_ecc"
    if (missing := _no_chips(name, readings)) is not None:
        return missing
    results: list[_DeviceResult] = []
    for ref in readings.chips:
        reading = readings.ecc.get(ref, Reading(error="not read"))
        if not reading.ok:
            results.append(_unknown(readings, ref, reading))
            continue
        hbm = reading.value.hbm
        double = hbm.double_bit_errors or 0
        double_pages = hbm.double_bit_isolated_pages or 0
        single_pages = hbm.single_bit_isolated_pages or 0
        if double > 0:
            detail = (f"npu-smi -t ecc: {int(double)} HBM double-bit errors, "
                      f"{int(double_pages)} pages isolated")
            results.append(_found(readings, ref, "ecc_double_bit", FAIL, detail))
        elif double_pages > 0 or single_pages > 0:
            detail = f"npu-smi -t ecc: {int(double_pages + single_pages)} HBM pages isolated"
            results.append(_found(readings, ref, "ecc_history", WARN, detail))
        else:
            results.append(_DeviceResult(ref.npu, PASS, f"{readings.label(ref)}: no double-bit errors"))
    return _aggregate(name, results, f"no HBM double-bit errors or isolated pages on {len(results)} chips",
                      "npu-smi must answer: try `npu-smi info -t ecc -i 0 -c 0` by hand")


def _roce_results(readings: NodeReadings, judge: Callable[[ChipRef, RoceReadings], _DeviceResult]
                  ) -> list[_DeviceResult]:
    return [judge(ref, roce) for ref, roce in readings.roce.items()]


_HCCN_HINT = "hccn_tool must answer: try `hccn_tool -i 0 -link -g` by hand; a hang points at the driver"


def _hccn(ref: ChipRef, command: str) -> str:
    return f"hccn_tool -i {device_id(ref)} -{command} -g"


def check_link(readings: NodeReadings) -> Check:
    """RoCE port state now (``hccn_tool -link``)."""
    name = "roce_link"
    if (missing := _no_chips(name, readings)) is not None:
        return missing

    def judge(ref: ChipRef, roce: RoceReadings) -> _DeviceResult:
        if not roce.link.ok:
            return _unknown(readings, ref, roce.link)
        if roce.link.value.up:
            return _DeviceResult(ref.npu, PASS, f"{readings.label(ref)}: UP")
        return _found(readings, ref, "link_down", FAIL, f"{_hccn(ref, 'link')} says {roce.link.value.state}",
                      text="link DOWN")

    results = _roce_results(readings, judge)
    return _aggregate(name, results, f"{len(results)} ports UP", _HCCN_HINT)


def check_flaps(readings: NodeReadings, window_s: float) -> Check:
    """Link changes in the recent window (``hccn_tool -link_stat``): a flapping port drops HCCL links."""
    name = "roce_flaps"
    if (missing := _no_chips(name, readings)) is not None:
        return missing
    window = _window_text(window_s)

    def judge(ref: ChipRef, roce: RoceReadings) -> _DeviceResult:
        if not roce.link_stat.ok:
            return _unknown(readings, ref, roce.link_stat)
        changes = hccn_link_stat.changes_within(roce.link_stat.value, window_s)
        downs = sum(change.state == hccn_link_stat.LINK_DOWN for change in changes)
        up_now = roce.link.ok and roce.link.value.up
        if downs >= FLAP_DOWNS:
            detail = (f"{_hccn(ref, 'link_stat')} shows {downs} link-down events in the last {window}"
                      f" ({len(changes)} changes)")
            return _found(readings, ref, "link_flapping", FAIL, detail)
        if downs == 1 and up_now:
            when = next(c.at for c in changes if c.state == hccn_link_stat.LINK_DOWN)
            detail = f"{_hccn(ref, 'link_stat')} shows the link went down at {when:%Y-%m-%d %H:%M:%S}"
            return _found(readings, ref, "link_down_recently", WARN, detail)
        return _DeviceResult(ref.npu, PASS, f"{readings.label(ref)}: {len(changes)} changes")

    results = _roce_results(readings, judge)
    ok_text = f"no port flapped in the last {window} ({len(results)} ports)"
    return _aggregate(name, results, ok_text, _HCCN_HINT)


def _latest(samples: Sequence[Reading]) -> Reading:
    for reading in reversed(samples):
        if reading.ok:
            return reading
    return samples[0]


def check_optics(readings: NodeReadings) -> Check:
    """Optical module: receive power per lane and the LOS/LoL flags (``hccn_tool -optical``)."""
    name = "optics"
    if (missing := _no_chips(name, readings)) is not None:
        return missing

    def judge(ref: ChipRef, roce: RoceReadings) -> _DeviceResult:
        reading = _latest(roce.optical)
        if not reading.ok:
            return _unknown(readings, ref, reading)
        record: hccn_optical.OpticalRecord = reading.value
        rx = record.rx_power_watts
        low = record.thresholds.get("rxpower_low_watts")
        dark = bool(rx) and all(watts < NO_LIGHT_WATTS for watts in rx.values())
        if record.signal_lost or dark:
            flags = [key for key, value in record.flags.items() if value and key.startswith("rx")]
            rx_text = ", ".join(f"{watts * 1e3:.4f}" for _, watts in sorted(rx.items()))
            detail = f"{_hccn(ref, 'optical')}: rx power [{rx_text}] mW" + (
                f", {' '.join(flags)} set" if flags else "")
            return _found(readings, ref, "optics_no_light", FAIL, detail)
        weak = sorted(lane for lane, watts in rx.items() if low is not None and watts < low)
        if weak:
            assert low is not None
            detail = f"{_hccn(ref, 'optical')}: rx power below {low * 1e3:.4f} mW on lanes {', '.join(weak)}"
            return _found(readings, ref, "optics_weak", WARN, detail)
        if not rx:
            return _DeviceResult(ref.npu, PASS, f"{readings.label(ref)}: no rx power readings")
        return _DeviceResult(ref.npu, PASS, f"{readings.label(ref)}: rx min {min(rx.values()) * 1e3:.3f} mW")

    results = _roce_results(readings, judge)
    return _aggregate(name, results, f"light on every lane, no LOS on {len(results)} modules", _HCCN_HINT)


def check_packet_errors(readings: NodeReadings) -> Check:
    """RoCE error counters (``hccn_tool -stat``) sampled twice: rising now is what matters."""
    name = "roce_errors"
    if (missing := _no_chips(name, readings)) is not None:
        return missing

    def judge(ref: ChipRef, roce: RoceReadings) -> _DeviceResult:
        if len(roce.stat) < 2 or not roce.stat[0].ok or not roce.stat[1].ok:
            failed = next((r for r in roce.stat if not r.ok), None)
            if failed is None:
                return _DeviceResult(ref.npu, UNKNOWN, f"{readings.label(ref)}: only one sample")
            return _unknown(readings, ref, failed)
        before, after = roce.stat[0].value.counters, roce.stat[1].value.counters
        seconds = max(1e-3, roce.stat[1].at - roce.stat[0].at)
        rising = {key: after[key] - before[key] for key in after
                  if key in before and hccn_stat.is_error_counter(key) and after[key] > before[key]}
        if rising:
            top = sorted(rising.items(), key=lambda item: -item[1])[:3]
            detail = (f"{_hccn(ref, 'stat')}: " + ", ".join(f"{key} +{delta}" for key, delta in top)
                      + f" in {seconds:.1f}s")
            return _found(readings, ref, "packet_errors", WARN, detail)
        return _DeviceResult(ref.npu, PASS, f"{readings.label(ref)}: no error counter rose")

    results = _roce_results(readings, judge)
    return _aggregate(name, results, f"no error counter rose on {len(results)} ports", _HCCN_HINT)


def check_net_health(readings: NodeReadings) -> Check:
    """The NIC's own reachability test of its detect address (``hccn_tool -net_health``)."""
    name = "net_health"
    if (missing := _no_chips(name, readings)) is not None:
        return missing

    def judge(ref: ChipRef, roce: RoceReadings) -> _DeviceResult:
        if not roce.net_health.ok:
            return _unknown(readings, ref, roce.net_health)
        record: hccn_net_health.NetHealthRecord = roce.net_health.value
        if record.healthy:
            return _DeviceResult(ref.npu, PASS, f"{readings.label(ref)}: Success")
        detail = f"{_hccn(ref, 'net_health')} says {record.state}"
        if record.state.casefold() == "init":
            return _found(readings, ref, "net_health_init", WARN, detail)
        return _found(readings, ref, "net_health", FAIL, detail)

    results = _roce_results(readings, judge)
    return _aggregate(name, results, f"{len(results)} ports report Success", _HCCN_HINT)


def check_ip_config(readings: NodeReadings, hccn_conf: str) -> Check:
    """Each port's live address (``hccn_tool -ip``) against ``/etc/hccn.conf``; duplicates too."""
    name = "roce_ip"
    if (missing := _no_chips(name, readings)) is not None:
        return missing
    live = {ref: roce.ip for ref, roce in readings.roce.items()}
    results: list[_DeviceResult] = []
    owners: dict[str, list[ChipRef]] = {}
    for ref, reading in live.items():
        if reading.ok:
            owners.setdefault(reading.value.address, []).append(ref)
    for address, refs in owners.items():
        for ref in refs[1:] if len(refs) > 1 else ():
            detail = f"{_hccn(ref, 'ip')}: {address} is also the address of {readings.label(refs[0])}"
            results.append(_found(readings, ref, "ip_mismatch", FAIL, detail))
    try:
        conf_text = Path(hccn_conf).read_text(encoding="utf-8", errors="replace")
    except OSError as exc:
        why = "missing" if isinstance(exc, FileNotFoundError) else (exc.strerror or str(exc))
        if results:
            return _aggregate(name, results, "")
        return Check(name, UNKNOWN, f"{hccn_conf}: {why}; live addresses not compared",
                     "set collectors.hccn_tool.hccn_conf to the file that configures the RoCE ports")
    try:
        entries = hccn_ip.parse_hccn_conf(conf_text)
    except ParseError as exc:
        return Check(name, UNKNOWN, f"{hccn_conf}: unreadable: {exc}", "fix the file's syntax (key_N=value)")
    for ref, reading in live.items():
        if not reading.ok:
            results.append(_unknown(readings, ref, reading))
            continue
        entry = entries.get(device_id(ref))
        if entry is None or entry.address is None:
            text = f"{readings.label(ref)}: no address_{device_id(ref)} in {hccn_conf}"
            results.append(_DeviceResult(ref.npu, WARN, text))
            continue
        problems = hccn_ip.mismatches(reading.value, entry)
        if problems:
            results.append(_found(readings, ref, "ip_mismatch", FAIL, f"{_hccn(ref, 'ip')}: {problems[0]}"))
        else:
            results.append(_DeviceResult(ref.npu, PASS, f"{readings.label(ref)}: {reading.value.address}"))
    return _aggregate(name, results, f"{len(live)} port addresses match {hccn_conf}")


def _window_text(window_s: float) -> str:
    if window_s >= 3600 and window_s % 3600 == 0:
        return f"{int(window_s // 3600)}h"
    if window_s >= 60 and window_s % 60 == 0:
        return f"{int(window_s // 60)}m"
    return f"{window_s:g}s"


# ----------------------------------------------------------------------------- logs


@dataclass(slots=True)
class LogScan:
    """Errors the recent logs hold: counted incidents and the culprit hints near them."""

    window_s: float
    roots: list[str]
    roots_exist: bool = False
    files: int = 0
    bytes_read: int = 0
    events: list[Event] = field(default_factory=list)
    hints: Counter[tuple[str, str]] = field(default_factory=Counter)
    errors: list[str] = field(default_factory=list)

    def by_category(self) -> Counter[str]:
        return Counter(event.category for event in self.events)

    def by_code(self) -> Counter[str]:
        return Counter(event.code for event in self.events)

    @property
    def timeouts(self) -> int:
        return sum(1 for event in self.events if event.category in _TIMEOUT_CATEGORIES)


def scan_recent_logs(paths: Sequence[str], globs: Sequence[str], kernel_log: str | None, *,
                     window_s: float = DEFAULT_WINDOW_S, byte_budget: int = 64 << 20,
                     per_file_bytes: int = DEFAULT_LOG_TAIL_BYTES, now: float | None = None) -> LogScan:
    """Classify the tail of every log file written within ``window_s`` (newest files first).

    At most ``per_file_bytes`` from the end of each file and ``byte_budget`` in all; events
    and hints older than the window (by their own timestamps) are dropped.
    """
    now = time.time() if now is None else now
    cutoff = now - window_s
    tailer = LogTailer(paths, tuple(globs) or DEFAULT_GLOBS, kernel_log, None)
    scan = LogScan(window_s=window_s, roots=[str(p) for p in paths], roots_exist=tailer.roots_exist())
    recent: list[tuple[float, str]] = []
    for path, real in tailer.discover():
        with contextlib.suppress(OSError):
            mtime = os.stat(real).st_mtime
            if mtime >= cutoff:
                recent.append((mtime, path))
    budget = byte_budget
    for mtime, path in sorted(recent, reverse=True):
        if budget <= 0:
            scan.errors.append(f"byte budget spent; {path} and older files not read")
            break
        try:
            lines, used = _tail_lines(path, min(per_file_bytes, budget))
        except OSError as exc:
            scan.errors.append(f"{path}: {exc.strerror or exc}")
            continue
        budget -= used
        scan.files += 1
        scan.bytes_read += used
        classifier = StreamClassifier(source=path, ref_time=mtime)
        events, hints = classifier.feed_lines(lines)
        scan.events.extend(e for e in events if e.timestamp is None or e.timestamp >= cutoff)
        scan.hints.update((h.kind, h.value) for h in hints if h.timestamp is None or h.timestamp >= cutoff)
    return scan


def _tail_lines(path: str, limit: int) -> tuple[list[str], int]:
    with open(path, "rb") as handle:
        size = handle.seek(0, os.SEEK_END)
        start = max(0, size - limit)
        handle.seek(start)
        data = handle.read(limit)
    if start > 0:  # began mid-line: drop the fragment
        newline = data.find(b"\n")
        data = data[newline + 1:] if newline >= 0 else b""
    if data and not data.endswith(b"\n"):
        data += b"\n"
    lines, _ = split_complete_lines(data, 64 << 10)
    return lines, len(data)


def remote_culprit(hints: Counter[tuple[str, str]],
                   local_ips: Iterable[str] = ()) -> tuple[str | None, str | None]:
    """(remote rank, remote IP) the logs blame most often; local addresses are not culprits."""
    local = set(local_ips)
    ranked = hints.most_common()
    rank = next((value for (kind, value), _ in ranked if kind in _RANK_KINDS and value.isdigit()), None)
    address = None
    for (kind, value), _ in hints.most_common():
        if kind not in _IP_KINDS:
            continue
        for candidate in _IPV4_RE.findall(value):
            with contextlib.suppress(ValueError):
                ipaddress.ip_address(candidate)
                if candidate not in local:
                    address = candidate
                    break
        if address is not None:
            break
    return rank, address


_CATEGORY_HINTS = {
    "exec_timeout": "HCCL_EXEC_TIMEOUT expired: a rank stopped taking part; start with the rank named",
    "connect_timeout": "links were never set up: check the peer's RoCE port, IP and firewall",
    "rendezvous_timeout": "not every rank reached the rendezvous: look for a rank that crashed or was late",
    "roce_cqe": "RoCE completion errors: check link, optics and PFC on this and the peer's port",
    "heartbeat": "a rank or device stopped its heartbeat: find the rank that died first",
    "watchdog_timeout": "torch_npu's watchdog hit a collective timeout: find the rank that stopped first",
}


def check_logs(scan: LogScan) -> Check:
    """HCCL/CANN errors of the recent window, by category, with the peers they blame."""
    name = "hccl_logs"
    window = _window_text(scan.window_s)
    if not scan.roots_exist:
        return Check(name, UNKNOWN, f"no log directory at {', '.join(scan.roots) or '(none configured)'}",
                     "set collectors.hccl_logs.paths to where CANN writes plogs ($ASCEND_PROCESS_LOG_PATH)")
    if not scan.events:
        suffix = f"; {scan.errors[0]}" if scan.errors else ""
        return Check(name, PASS, f"no HCCL errors in the last {window} ({scan.files} files read){suffix}")
    categories = scan.by_category()
    codes = scan.by_code()
    parts = [f"{category} x{count}" for category, count in categories.most_common()]
    evidence = (f"{len(scan.events)} incidents in the last {window}: {', '.join(parts)}"
                f" (codes {', '.join(code for code, _ in codes.most_common(4))})")
    if scan.hints:
        evidence += "; blamed: " + ", ".join(f"{kind} {value} x{count}"
                                             for (kind, value), count in scan.hints.most_common(3))
    top = categories.most_common(1)[0][0]
    hint = _CATEGORY_HINTS.get(top, "read the first error: `npuwatch scan-logs` on the log directory")
    findings = tuple(
        Finding("heartbeat_lost", FAIL, int(value), f"NPU {value}",
                f"kernel log: Heartbeat lost! (device={value})")
        for (kind, value), _ in scan.hints.most_common() if kind == "device" and value.isdigit()
    )
    return Check(name, FAIL if findings else WARN, evidence, hint,
                 findings[0].npu if findings else None, findings)
