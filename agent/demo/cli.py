"""``npuwatch demo``: switch faults on a demo node that ``npuwatch run --demo --demo-dir DIR`` started."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from agent.demo.faults import FAULTS, parse_param

__all__ = ["EXIT_USAGE", "add_arguments", "main"]

EXIT_USAGE = 2


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--demo-dir", type=Path, required=True, metavar="DIR",
                        help="the --demo-dir given to `npuwatch run --demo`")
    sub = parser.add_subparsers(dest="demo_command", metavar="ACTION", required=True)
    on = sub.add_parser("set", help="switch a fault on (a log fault appends its plog lines once)")
    on.add_argument("fault", choices=sorted(FAULTS))
    on.add_argument("--npu", type=int, metavar="N",
                    help="the chip (npu id): required by chip and log faults, refused by node faults")
    on.add_argument("--param", action="append", default=[], metavar="KEY=VALUE",
                    help="a parameter the fault declares, e.g. state=Alarm or codes=8C084E00,A4025021 (repeatable)")
    off = sub.add_parser("clear", help="switch a fault off (what it counted stays counted)")
    off.add_argument("fault", choices=(*sorted(FAULTS), "all"))
    off.add_argument("--npu", type=int, metavar="N", help="the chip; a chip fault without it: on every chip")
    sub.add_parser("show", help="print the demo state as JSON")


def _fail(message: str) -> int:
    print(f"npuwatch demo: {message}", file=sys.stderr)
    return EXIT_USAGE


def main(args: argparse.Namespace) -> int:
    from agent.demo.node import DemoNode

    node = DemoNode(args.demo_dir)
    if not node.has_state():
        return _fail(f"no demo node at {args.demo_dir} (start one with npuwatch run --demo --demo-dir {args.demo_dir})")
    extra: dict[str, Any] = {}
    try:
        if args.demo_command == "set":
            params = dict(parse_param(pair) for pair in args.param)
            written = node.set_fault(args.fault, chip=args.npu, **params)
            if written is not None:
                extra["plog"] = str(written)
        elif args.demo_command == "clear":
            if args.fault == "all":
                node.clear_all()
            else:
                node.clear_fault(args.fault, chip=args.npu)
    except ValueError as exc:
        return _fail(str(exc))
    state = node.read()
    shown = {"node_faults": state.node_faults, "chip_faults": state.chip_faults, "carried": state.carried, **extra}
    print(json.dumps(shown, indent=2, sort_keys=True, default=str))
    return 0
