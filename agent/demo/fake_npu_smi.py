"""Fake ``npu-smi`` for the demo node and the tests (run through a generated wrapper script).

Supported: ``info``, ``info -m``, ``info -l``, ``info -t topo`` and
``info -t usages|common|power|temp|memory|ecc|health|board|hccs|hccs-bw -i N [-c C]``.
A vanished or unknown card answers like the real tool: ``Invalid card id.`` and a usage line.
"""

from __future__ import annotations

import sys

from agent.demo.render_common import ToolOutput, run_fake
from agent.demo.render_npu_smi import (
    KV_TYPES,
    USAGE_LINE,
    render_kv_type,
    render_list,
    render_mapping,
    render_table,
    render_topo,
)
from agent.demo.state import DemoState

__all__ = ["main", "render"]

_HELP = (
    "Description: npu-smi (demo) query and set NPU information.\n"
    "Usage: npu-smi info <watch|proc|-h|-m|-l|-t type> [Options...]\n"
)


def _usage_error(message: str) -> ToolOutput:
    return ToolOutput(message + USAGE_LINE, exit_code=1)


def _options(args: list[str]) -> dict[str, str] | None:
    """``-t usages -i 0 -c 0`` -> {"-t": "usages", ...}; None when an option lacks its value."""
    options: dict[str, str] = {}
    index = 0
    while index < len(args):
        flag = args[index]
        if flag in ("-m", "-l"):
            options[flag] = ""
            index += 1
            continue
        if index + 1 >= len(args):
            return None
        options[flag] = args[index + 1]
        index += 2
    return options


def _parse_id(text: str) -> int | None:
    return int(text) if text.isdigit() else None


def render(state: DemoState, now: float, argv: list[str]) -> ToolOutput:
    """The output of ``npu-smi <argv>`` against ``state`` at ``now``."""
    if not argv or argv[0] in ("-h", "--help", "help"):
        return ToolOutput(_HELP)
    if argv[0] != "info":
        return ToolOutput(f"Invalid command {argv[0]}.\n" + _HELP, exit_code=1)
    options = _options(argv[1:])
    if options is None:
        return _usage_error("Missing parameter value.\n")
    if not options:
        return ToolOutput(render_table(state, now))
    if "-m" in options:
        return ToolOutput(render_mapping(state))
    if "-l" in options:
        return ToolOutput(render_list(state))
    info_type = options.get("-t")
    if info_type == "topo":
        return ToolOutput(render_topo(state))
    if info_type not in KV_TYPES:
        return _usage_error(f"Invalid parameter of -t: {info_type}.\n")
    npu = _parse_id(options.get("-i", ""))
    if npu is None or npu not in state.visible_chips():
        return _usage_error("Invalid card id.\nError parameter of -i\n")
    chip: int | None = None
    if "-c" in options:
        chip = _parse_id(options["-c"])
        if chip != 0:  # one Ascend chip per NPU on 910B; chip 1 is the MCU, which -t does not serve here
            return _usage_error("Invalid chip id.\nError parameter of -c\n")
    return ToolOutput(render_kv_type(state, info_type, npu, chip, now))


def main(argv: list[str] | None = None) -> int:
    return run_fake("npu_smi", sys.argv[1:] if argv is None else argv, render)


if __name__ == "__main__":
    sys.exit(main())
