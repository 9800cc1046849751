"""What the quick level reads: diagnose's node readings (``read_node``, through its ``ToolBox``), the
cards' versions and HCCS state (through the same ToolBox), the recent logs, and the local agent.

Nothing here judges: the check modules turn these readings into results.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from agent.diagnose.readings import ToolBox, read_node
from agent.health.readings import LogScan, NodeReadings, QuickReadings, Reading
from collectors import npu_smi_board, npu_smi_hccs
from collectors.base import ChipRef
from collectors.hccl_classify import StreamClassifier
from collectors.hccl_tail import DEFAULT_GLOBS, LogTailer, split_complete_lines
from collectors.npu_smi_kv import chip_argv

__all__ = ["read_quick", "scan_logs"]

_PER_FILE_BYTES = 8 << 20


def read_quick(tools: ToolBox, *, want_hccs: bool, want_boards: bool, want_roce: bool,
               scan: Callable[[], LogScan] | None, agent: Callable[[], Any] | None) -> QuickReadings:
    """Everything the quick checks judge, read once. The cards' ``-t board``/``-t hccs`` calls, the
    agent and the logs run beside ``read_node`` (which reads the chips and their RoCE ports), so the
    level takes as long as its busiest tool, not the sum of its phases."""
    started = time.monotonic()
    with ThreadPoolExecutor(max_workers=2, thread_name_prefix="check-side") as side:
        agent_future = side.submit(agent) if agent is not None else None
        cards_future = side.submit(_read_cards, tools, want_hccs, want_boards) if want_hccs or want_boards else None
        node = read_node(tools, 0.0, scan) if want_roce else _chips_only(tools, scan)
        readings = QuickReadings(node=node)
        if cards_future is not None:
            readings.boards, readings.hccs = cards_future.result()
        if agent_future is not None:
            readings.agent = agent_future.result()
    readings.read_s = time.monotonic() - started
    return readings


def _chip_list(tools: ToolBox) -> list[ChipRef]:
    from collectors import npu_smi_info, npu_smi_mapping

    table = tools.read("npu-smi", ["info"], npu_smi_info.parse)
    if not table.ok:
        return []
    mapping = tools.read("npu-smi", ["info", "-m"], npu_smi_mapping.parse)
    return npu_smi_info.chip_refs(table.value, mapping.value if mapping.ok else None)


def _chips_only(tools: ToolBox, scan: Callable[[], LogScan] | None) -> NodeReadings:
    """``read_node`` without its hccn_tool calls, for a node whose RoCE checks are all skipped."""
    from collectors import npu_smi_ecc, npu_smi_health, npu_smi_info, npu_smi_mapping

    table = tools.read("npu-smi", ["info"], npu_smi_info.parse)
    node = NodeReadings(table=table)
    if table.ok:
        mapping = tools.read("npu-smi", ["info", "-m"], npu_smi_mapping.parse)
        node.chips = npu_smi_info.chip_refs(table.value, mapping.value if mapping.ok else None)
        with ThreadPoolExecutor(max_workers=max(1, tools.parallelism), thread_name_prefix="check") as pool:
            health = {ref: pool.submit(tools.read, "npu-smi", chip_argv("health", ref),
                                       _bind(npu_smi_health.parse, ref.chip)) for ref in node.chips}
            ecc = {ref: pool.submit(tools.read, "npu-smi", chip_argv("ecc", ref),
                                    _bind(npu_smi_ecc.parse, ref.chip)) for ref in node.chips}
            node.health = {ref: future.result() for ref, future in health.items()}
            node.ecc = {ref: future.result() for ref, future in ecc.items()}
    if scan is not None:
        node.logs = scan()
    return node


def _bind(parse: Callable[[str, int | None], Any], chip: int) -> Callable[[str], Any]:
    return lambda text: parse(text, chip)


def _read_cards(tools: ToolBox, want_hccs: bool, want_boards: bool
                ) -> tuple[dict[int, Reading], dict[ChipRef, Reading]]:
    """``-t board`` per card and ``-t hccs`` per chip, after a chip list of their own (two calls more, so
    they need not wait for ``read_node``)."""
    chips = _chip_list(tools)
    cards: dict[int, ChipRef] = {}
    for ref in chips:
        cards.setdefault(ref.npu, ref)
    with ThreadPoolExecutor(max_workers=max(1, tools.parallelism), thread_name_prefix="check-cards") as pool:
        boards = {npu: pool.submit(tools.read, "npu-smi", chip_argv("board", ref, card_level=True),
                                   npu_smi_board.parse)
                  for npu, ref in cards.items()} if want_boards else {}
        hccs = {ref: pool.submit(tools.read, "npu-smi", chip_argv("hccs", ref), _bind(npu_smi_hccs.parse, ref.chip))
                for ref in chips} if want_hccs else {}
        return ({npu: future.result() for npu, future in boards.items()},
                {ref: future.result() for ref, future in hccs.items()})


# ----------------------------------------------------------------------------- logs


def scan_logs(paths: Sequence[str], globs: Sequence[str], kernel_log: str | None, *, window_s: float,
              byte_budget: int, now: float | None = None) -> LogScan:
    """HCCL/CANN incidents of the last ``window_s`` in the tails of the recently written log files."""
    now = time.time() if now is None else now
    cutoff = now - window_s
    tailer = LogTailer(list(paths), (*DEFAULT_GLOBS, *globs), kernel_log, None)
    scan = LogScan(window_s=window_s, roots=[str(path) for path in paths], roots_exist=tailer.roots_exist())
    recent: list[tuple[float, str]] = []
    for path, real in tailer.discover():
        with contextlib.suppress(OSError):
            mtime = os.stat(real).st_mtime
            if mtime >= cutoff:
                recent.append((mtime, path))
    budget = byte_budget
    for mtime, path in sorted(recent, reverse=True):  # newest first: the budget goes to what matters
        if budget <= 0:
            scan.errors.append(f"byte budget spent; {path} and older files not read")
            break
        try:
            lines, used = _tail(path, min(_PER_FILE_BYTES, budget))
        except OSError as exc:
            scan.errors.append(f"{path}: {exc.strerror or exc}")
            continue
        budget -= used
        scan.files += 1
        scan.bytes_read += used
        events, hints = StreamClassifier(source=path, ref_time=mtime).feed_lines(lines)
        scan.events.extend(e for e in events if e.timestamp is None or e.timestamp >= cutoff)
        scan.hints.update((h.kind, h.value) for h in hints if h.timestamp is None or h.timestamp >= cutoff)
    return scan


def _tail(path: str, limit: int) -> tuple[list[str], int]:
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
