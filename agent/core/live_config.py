"""The config an install writes: the shipped example with no example value switched on, and the node's
chip count when ``npu-smi info`` answers (left at 0, unknown, otherwise).

``python -m agent.core.live_config EXAMPLE DEST`` (scripts/install.sh): DEST is written only when it does
not exist, and the chip count is reported on stderr so the person installing can check it. A chip count
learned from a node that already lost a chip is wrong, so the line says where it came from.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from collections.abc import Sequence
from pathlib import Path

import yaml

from agent.core.config import ConfigError, build_config
from agent.core.tool_runner import ToolFailed, ToolMissing, ToolTimeout, resolve_tool, run_tool
from collectors.base import ParseError, ToolError
from collectors.npu_smi_info import parse

__all__ = ["learn_chips", "live_config", "main"]

# A line that sets a value and says it is an example: never live.
_EXAMPLE_LINE = re.compile(r"^(\s*)(?!#)(\S.*#\s*example\b.*)$")
_CHIPS_LINE = re.compile(r"^expected_chips:.*$", re.MULTILINE)
TIMEOUT_S = 15.0


def learn_chips(npu_smi: str | None = None) -> tuple[int, str]:
    """(chips ``npu-smi info`` lists, how that was found); (0, why not) when it does not answer."""
    try:
        path = resolve_tool("npu-smi", npu_smi)
        table = parse(run_tool([path, "info"], TIMEOUT_S).stdout)
    except (ToolMissing, ToolFailed, ToolTimeout, ParseError, ToolError) as exc:
        return 0, str(exc)
    return len(table.chips), f"{path} info lists {len(table.chips)} chips"


def live_config(example: str, chips: int, source: str) -> str:
    """``example`` with every example value commented out and ``expected_chips`` set to ``chips`` (when known)."""
    text = "\n".join(_EXAMPLE_LINE.sub(r"\1# \2", line) for line in example.splitlines()) + "\n"
    if chips > 0:
        line = f"expected_chips: {chips}              # learned at install: {source}; check it"
        text, count = _CHIPS_LINE.subn(lambda _match: line, text, count=1)
        if not count:
            text += line + "\n"
    return text


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m agent.core.live_config", description=__doc__.split("\n\n")[0])
    parser.add_argument("example", type=Path)
    parser.add_argument("dest", type=Path)
    parser.add_argument("--npu-smi", metavar="PATH", help="npu-smi to ask (default: PATH, the Ascend locations)")
    args = parser.parse_args(argv)
    chips, source = learn_chips(args.npu_smi)
    text = live_config(args.example.read_text(encoding="utf-8"), chips, source)
    try:
        build_config(yaml.safe_load(text), str(args.dest))
    except ConfigError as exc:  # the example itself is broken: write nothing
        print(f"npuwatch install: {exc}", file=sys.stderr)
        return 2
    with open(os.open(args.dest, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644), "w", encoding="utf-8") as out:
        out.write(text)
    if chips:
        print(f"npuwatch install: expected_chips: {chips} ({source}): check it in {args.dest}", file=sys.stderr)
    else:
        print(f"npuwatch install: expected_chips left at 0, unknown ({source}): set it in {args.dest} to the "
              "chips this node has, or NPUChipMissing and check's chip_count cannot see a missing chip",
              file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
