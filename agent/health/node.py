"""What the commands read of a node, through a ``NodeReader``: the chip list, each chip's health and ECC,
its RoCE port (optics and counters twice), and the cards' board and HCCS state.

Every call names the collector ``Source`` it runs, so the argv is the one the agent's collectors use. The
chips are the agent's (``collectors.sources.chips_from``); ``chip_list`` and ``port_devices`` are what
``npuwatch bundle`` snapshots too.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from concurrent.futures import Executor, Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

from agent.core.humanize import duration
from agent.handling.history import FaultHistory, chip_key
from agent.health.reader import NodeReader
from agent.health.readings import LogScan, NodeReadings, Reading, RoceReadings
from collectors import (
    hccn_ip,
    hccn_link,
    hccn_link_stat,
    hccn_net_health,
    hccn_optical,
    hccn_stat,
    npu_smi_board,
    npu_smi_ecc,
    npu_smi_hccs,
    npu_smi_health,
    npu_smi_info,
    npu_smi_mapping,
)
from collectors.base import ChipRef, ParseError, Source
from collectors.hccn_ip import HccnConfEntry, parse_hccn_conf
from collectors.hccn_link import device_id
from collectors.sources import chips_from

__all__ = ["PORT_READINGS", "calls_pool", "chip_list", "info_parse", "port_devices", "read_cards", "read_chip_list",
           "read_chips", "read_hccn_conf", "read_history", "read_node"]

ChipParse = Callable[[str, "int | None"], Any]


def chip_parse(parse: ChipParse, chip: int) -> Callable[[str], Any]:
    """An npu-smi record parser bound to the chip asked about (card-level output may hold several)."""
    return lambda text: parse(text, chip)


def _quiet(_text: str) -> None:
    """Progress nobody watches."""


class _Inline(Executor):
    """Runs each call at once in the caller's thread."""

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future[Any]:
        future: Future[Any] = Future()
        try:
            future.set_result(fn(*args, **kwargs))
        except BaseException as exc:
            future.set_exception(exc)
        return future


def calls_pool(reader: NodeReader, workers: int, name: str) -> Executor:
    """Threads for a reader's calls; none for a reader that answers at once (``parallelism`` 0: the agent's
    own records), whose calls then cost no thread."""
    return _Inline() if reader.parallelism == 0 else ThreadPoolExecutor(max_workers=workers, thread_name_prefix=name)


def read_chip_list(reader: NodeReader) -> tuple[Reading, list[ChipRef]]:
    """``npu-smi info`` and, when it answered, ``info -m``: the table's reading and the chips it lists."""
    table = reader.read(npu_smi_info.SOURCE, parse=info_parse(reader.max_chips))
    if not table.ok:
        return table, []
    return table, chip_list(table, reader.read(npu_smi_mapping.SOURCE))


def info_parse(max_chips: int) -> Callable[[str], Any]:
    """``npu-smi info``'s parser refusing a table of more than ``max_chips`` chips, as the agent's Source does."""
    return lambda text: npu_smi_info.parse(text, max_chips)


def chip_list(table: Reading, mapping: Reading | None) -> list[ChipRef]:
    """The chips of ``npu-smi info``'s reading, with ``info -m``'s ids when that answered (a mapping that
    failed leaves the table's own ids, as in the agent)."""
    if not table.ok:
        return []
    return chips_from(table.value, mapping.value if mapping is not None and mapping.ok else None)


def read_hccn_conf(path: str | Path) -> tuple[dict[int, HccnConfEntry] | None, str | None]:
    """``/etc/hccn.conf``'s entries by device id, or why the file cannot be used."""
    try:
        return parse_hccn_conf(Path(path).read_text(encoding="utf-8", errors="replace")), None
    except OSError as exc:
        why = "missing" if isinstance(exc, FileNotFoundError) else (exc.strerror or str(exc))
        return None, f"{path}: {why}"
    except ParseError as exc:
        return None, f"{path}: unreadable: {exc}"


def port_devices(chips: list[ChipRef], hccn_conf: str | Path) -> list[int]:
    """The RoCE ports to ask ``hccn_tool -i`` about: each chip's device id; without a chip list (npu-smi did
    not answer), the devices ``hccn.conf`` configures."""
    if chips:
        return sorted({device_id(ref) for ref in chips})
    entries, _ = read_hccn_conf(hccn_conf)
    return sorted(entries or ())


def read_history(readings: NodeReadings, history_file: str | Path | None) -> None:
    """The agent's fault history of the chips read (agent.handling.history): each chip's escalation marks and
    held manual separations, and a note that says whether there was one to read."""
    path = Path(history_file) if history_file is not None else None
    if path is None or not path.exists():
        readings.history_note = (f"no fault history at {path}: one reading, without the agent's escalation"
                                 if path is not None else "no fault history: one reading, without escalation")
        return
    chips = FaultHistory(path).read()
    readings.histories = {ref: chips[chip_key(ref.npu, ref.chip)] for ref in readings.chips
                          if chip_key(ref.npu, ref.chip) in chips}
    readings.held = {ref: {code: mark.since for code, mark in history.held.items()}
                     for ref, history in readings.histories.items() if history.held}
    readings.history_note = f"with the agent's fault history ({path})"


def read_node(reader: NodeReader, gap_s: float, scan_logs: Callable[[], LogScan] | None = None,
              say: Callable[[str], None] = _quiet) -> NodeReadings:
    """Every tool call diagnose needs: the chip list first, then per-chip reads in parallel.

    Optics and packet counters are read twice, ``gap_s`` apart, to see counters rise. ``say``
    hears what is going on (``12/80 npu-smi and hccn_tool calls``), for a progress line.
    """
    # One thread per allowed tool call plus the log scan: a call waiting for its tool's turn
    # never holds up a call to the other tool.
    with calls_pool(reader, reader.parallelism + 1, "diagnose") as pool:
        logs_future = pool.submit(scan_logs) if scan_logs is not None else None
        say("npu-smi info")
        table, chips = read_chip_list(reader)
        readings = NodeReadings(table=table, chips=chips)
        if table.ok:
            _read_chips(reader, pool, readings, gap_s, _CallCounter(say))
        if logs_future is not None:
            say("reading the HCCL/CANN logs")
            readings.logs = logs_future.result()
    return readings


def read_chips(reader: NodeReader, scan_logs: Callable[[], LogScan] | None) -> NodeReadings:
    """``read_node`` without its hccn_tool calls, for a node whose RoCE checks are all skipped."""
    table, chips = read_chip_list(reader)
    node = NodeReadings(table=table, chips=chips)
    if table.ok:
        with calls_pool(reader, max(1, reader.parallelism), "check") as pool:
            health = {ref: pool.submit(reader.read, npu_smi_health.SOURCE, ref,
                                       chip_parse(npu_smi_health.parse, ref.chip)) for ref in node.chips}
            ecc = {ref: pool.submit(reader.read, npu_smi_ecc.SOURCE, ref,
                                    chip_parse(npu_smi_ecc.parse, ref.chip)) for ref in node.chips}
            node.health = {ref: future.result() for ref, future in health.items()}
            node.ecc = {ref: future.result() for ref, future in ecc.items()}
    if scan_logs is not None:
        node.logs = scan_logs()
    return node


def read_cards(reader: NodeReader, want_hccs: bool, want_boards: bool
               ) -> tuple[dict[int, Reading], dict[ChipRef, Reading]]:
    """``-t board`` per card and ``-t hccs`` per chip, after a chip list of their own (two calls more, so
    they need not wait for ``read_node``)."""
    _, chips = read_chip_list(reader)
    cards: dict[int, ChipRef] = {}
    for ref in chips:
        cards.setdefault(ref.npu, ref)
    with calls_pool(reader, max(1, reader.parallelism), "check-cards") as pool:
        boards = {npu: pool.submit(reader.read, npu_smi_board.SOURCE, ref, npu_smi_board.parse)
                  for npu, ref in cards.items()} if want_boards else {}
        hccs = {ref: pool.submit(reader.read, npu_smi_hccs.SOURCE, ref, chip_parse(npu_smi_hccs.parse, ref.chip))
                for ref in chips} if want_hccs else {}
        return ({npu: future.result() for npu, future in boards.items()},
                {ref: future.result() for ref, future in hccs.items()})


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


# The RoCE port's readings: the collector whose Source is run, and its one-record parser (bundle saves the same).
PORT_READINGS: dict[str, tuple[Source, Callable[[str], Any]]] = {
    "optical": (hccn_optical.SOURCE, hccn_optical.parse),
    "stat": (hccn_stat.SOURCE, hccn_stat.parse),
    "link": (hccn_link.SOURCE, hccn_link.parse),
    "link_stat": (hccn_link_stat.SOURCE, hccn_link_stat.parse),
    "net_health": (hccn_net_health.SOURCE, hccn_net_health.parse),
    "ip": (hccn_ip.SOURCE, hccn_ip.parse),
}
_SAMPLED_TWICE = ("optical", "stat")


def _read_chips(reader: NodeReader, pool: Executor, readings: NodeReadings, gap_s: float,
                calls: _CallCounter) -> None:
    def npu_smi(ref: ChipRef, source: Source, parse: ChipParse) -> Future[Reading]:
        return calls.add(pool.submit(reader.read, source, ref, chip_parse(parse, ref.chip)))

    def hccn(ref: ChipRef, name: str) -> Future[Reading]:
        source, parse = PORT_READINGS[name]
        return calls.add(pool.submit(reader.read, source, ref, parse))

    health = {ref: npu_smi(ref, npu_smi_health.SOURCE, npu_smi_health.parse) for ref in readings.chips}
    ecc = {ref: npu_smi(ref, npu_smi_ecc.SOURCE, npu_smi_ecc.parse) for ref in readings.chips}
    first = {ref: {name: hccn(ref, name) for name in PORT_READINGS} for ref in readings.chips}
    done_first = {ref: {name: future.result() for name, future in calls.items()}
                  for ref, calls in first.items()}
    sampled = [r[name] for r in done_first.values() for name in _SAMPLED_TWICE if r[name].ok]
    second: dict[ChipRef, dict[str, Future[Reading]]] = {}
    if sampled:  # no second round when no port answered the first
        wait = gap_s - (time.monotonic() - min(reading.at for reading in sampled))
        if wait > 0:
            calls.say(f"waiting {duration(wait)} for the second optics and counter sample")
            time.sleep(wait)
        second = {ref: {name: hccn(ref, name) for name in _SAMPLED_TWICE}
                  for ref, r in done_first.items() if r["optical"].ok or r["stat"].ok}
    for ref, r in done_first.items():
        again = {name: future.result() for name, future in second.get(ref, {}).items()}
        readings.roce[ref] = RoceReadings(
            link=r["link"], link_stat=r["link_stat"], net_health=r["net_health"], ip=r["ip"],
            optical=[r["optical"], *([again["optical"]] if "optical" in again else [])],
            stat=[r["stat"], *([again["stat"]] if "stat" in again else [])],
        )
    readings.health = {ref: future.result() for ref, future in health.items()}
    readings.ecc = {ref: future.result() for ref, future in ecc.items()}
