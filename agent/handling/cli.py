"""``npuwatch faults``: the held manual separations and the escalation history the agent keeps, and
``npuwatch faults clear --npu N`` after the chip's repair."""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import replace
from typing import TYPE_CHECKING

from agent.handling.escalation import ChipHistory
from agent.handling.history import FaultHistory, chip_key
from agent.handling.levels import history_of

if TYPE_CHECKING:
    from agent.core.config import Config

__all__ = ["add_arguments", "main"]

EXIT_OK = 0
EXIT_NOTHING = 1  # clear: the chip held no manual separation
EXIT_NOT_WRITTEN = 3  # clear: the history file could not be written, so the hold stays


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="faults_command", metavar="ACTION", required=True)
    show = sub.add_parser("show", help="each chip's held separations and the codes the agent has seen")
    show.add_argument("--json", action="store_true", help="one JSON object on stdout")
    clear = sub.add_parser("clear", help="release a chip's ManuallySeparateNPU after its repair (and forget the "
                                         "occurrences that raised it)")
    clear.add_argument("--npu", type=int, required=True, metavar="N", help="the NPU id (npu-smi's)")
    clear.add_argument("--chip", type=int, metavar="C", help="one chip of it (default: every chip of the NPU)")


def _show(history: FaultHistory, as_json: bool) -> int:
    chips = history.read()
    if as_json:
        print(json.dumps({key: {"held": {code: {"since": mark.since, "release_s": mark.release_s}
                                         for code, mark in chip.held.items()},
                                "raised": {code: {"level": mark.level, "since": mark.since,
                                                  "release_s": mark.release_s}
                                           for code, mark in chip.raised.items()},
                                "lasting_since": dict(chip.lasting),
                                "active_since": dict(chip.active),
                                "occurrences": {code: list(times) for code, times in chip.seen.items()}}
                          for key, chip in sorted(chips.items())}, indent=2))
        return EXIT_OK
    if not chips:
        print(f"no error-code history in {history.path}")
    elif not any(chip.held for chip in chips.values()):
        print(f"no chip is held at ManuallySeparateNPU ({history.path})")
    for key, chip in sorted(chips.items()):
        npu, _, number = key.partition(":")
        for code, since in sorted(chip.active.items()):
            print(f"NPU {npu} chip {number}: {code} active since {_when(since)}")
        for code, mark in sorted(chip.held.items()):
            print(f"NPU {npu} chip {number}: ManuallySeparateNPU for {code} since {_when(mark.since)}"
                  f" (clear after repair: npuwatch faults clear --npu {npu} --chip {number})")
        for code, raised in sorted(chip.raised.items()):
            print(f"NPU {npu} chip {number}: {raised.level} for {code} since {_when(raised.since)}"
                  f" (released {raised.release_s:g} s after its last recovery)")
        for code, since in sorted(chip.lasting.items()):
            print(f"NPU {npu} chip {number}: {code} has lasted past its duration rule since {_when(since)}")
        for code, times in sorted(chip.seen.items()):
            print(f"NPU {npu} chip {number}: {code} became active {len(times)} time(s), last {_when(max(times))}")
    return EXIT_OK


def _when(epoch: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(epoch))


def _clear(history: FaultHistory, npu: int, chip: int | None) -> int:
    cleared: list[str] = []

    def change(chips: dict[str, ChipHistory]) -> dict[str, ChipHistory]:
        for key, state in chips.items():
            if not state.held or not (key == chip_key(npu, chip) if chip is not None
                                      else key.partition(":")[0] == str(npu)):
                continue
            cleared.extend(f"NPU {key.replace(':', ' chip ')}: {code}" for code in sorted(state.held))
            seen = {code: times for code, times in state.seen.items() if code not in state.held}
            chips[key] = replace(state, seen=seen, held={})
        return chips

    where = f"NPU {npu}" + (f" chip {chip}" if chip is not None else "")
    try:
        history.update(change, must_save=True)
    except OSError as exc:
        print(f"error: {where} not cleared: cannot write {history.path}: {exc.strerror or exc}; the agent keeps "
              "the ManuallySeparateNPU until a clear is written", file=sys.stderr)
        return EXIT_NOT_WRITTEN
    if not cleared:
        print(f"{where} holds no ManuallySeparateNPU in {history.path}", file=sys.stderr)
        return EXIT_NOTHING
    for line in cleared:
        print(f"cleared ManuallySeparateNPU of {line}")
    return EXIT_OK


def main(args: argparse.Namespace, config: Config) -> int:
    history = history_of(config)
    if args.faults_command == "show":
        return _show(history, args.json)
    return _clear(history, args.npu, args.chip)
