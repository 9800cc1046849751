"""``npuwatch demo``: switch faults on a running demo node."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

__all__ = ["add_arguments", "main"]

from agent.demo.state import CHIP_FAULTS, NODE_FAULTS

FAULTS = tuple(sorted(CHIP_FAULTS | NODE_FAULTS))


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--demo-dir", type=Path, required=True, metavar="DIR",
                        help="the --demo-dir given to `npuwatch run --demo`")
    sub = parser.add_subparsers(dest="demo_command", metavar="ACTION", required=True)
    on = sub.add_parser("set", help="switch a fault on")
    on.add_argument("fault", choices=FAULTS)
    on.add_argument("--npu", type=int, help="the chip (npu id) it applies to; node-wide when omitted")
    on.add_argument("--param", action="append", default=[], metavar="KEY=VALUE",
                    help="fault parameter, e.g. state=Alarm or codes=8C084E00 (repeatable)")
    off = sub.add_parser("clear", help="switch a fault off")
    off.add_argument("fault", choices=(*FAULTS, "all"))
    off.add_argument("--npu", type=int)
    sub.add_parser("show", help="print the demo state as JSON")


def _params(pairs: list[str]) -> dict[str, object]:
    params: dict[str, object] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep:
            raise SystemExit(f"npuwatch demo: --param expects KEY=VALUE, got {pair!r}")
        if key == "codes":
            params[key] = value.split(",")
        else:
            try:
                params[key] = float(value) if "." in value else int(value)
            except ValueError:
                params[key] = value
    return params


def main(args: argparse.Namespace) -> int:
    from agent.demo.node import DemoNode

    node = DemoNode(args.demo_dir)
    if not node.exists():
        node.create()  # faults can be set before `npuwatch run --demo --demo-dir DIR` starts
    if args.demo_command == "set":
        node.set_fault(args.fault, chip=args.npu, **_params(args.param))
    elif args.demo_command == "clear":
        if args.fault == "all":
            node.clear_all()
        else:
            node.clear_fault(args.fault, chip=args.npu)
    state = node.read()
    print(json.dumps({"node_faults": state.node_faults, "chip_faults": state.chip_faults},
                     indent=2, sort_keys=True, default=str))
    return 0
