"""``npuwatch demo``: switch faults on a demo node that ``npuwatch run --demo --demo-dir DIR`` started,
or play one over several (``npuwatch demo fleet hccl-hang --culprit node-3 --npu 1 DIR...``)."""

from __future__ import annotations

import argparse
import difflib
import json
import sys
import textwrap
from pathlib import Path
from typing import Any

from agent.demo.faults import FAULTS, parse_param
from agent.demo.fleet import SCENARIOS

__all__ = ["EXIT_USAGE", "add_arguments", "fault_list", "main"]

EXIT_USAGE = 2


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--demo-dir", type=Path, metavar="DIR",
                        help="the --demo-dir given to `npuwatch run --demo` (set, clear, show; default: "
                             "$NPUWATCH_DEMO_DIR, else /tmp/npuwatch-demo-UID, one per user)")
    sub = parser.add_subparsers(dest="demo_command", metavar="ACTION", required=True)
    on = sub.add_parser("set", help="switch a fault on (a log fault appends its plog lines once)",
                        formatter_class=argparse.RawDescriptionHelpFormatter, epilog=fault_list())
    on.add_argument("fault", type=_fault_name, metavar="FAULT", help="one of the faults below")
    on.add_argument("--npu", type=int, metavar="N",
                    help="the chip (npu id): required by chip and log faults, refused by node faults")
    on.add_argument("--param", action="append", default=[], metavar="KEY=VALUE",
                    help="a parameter the fault declares, e.g. state=Alarm or codes=8C084E00,A4025021 (repeatable)")
    off = sub.add_parser("clear", help="switch a fault off (what it counted stays counted)")
    off.add_argument("fault", type=_fault_or_all, metavar="FAULT",
                     help="a fault that `npuwatch demo set --help` lists, or all")
    off.add_argument("--npu", type=int, metavar="N", help="the chip; a chip fault without it: on every chip")
    sub.add_parser("show", help="print the demo state as JSON")
    fleet = sub.add_parser("fleet", help="a fault over several demo nodes (one DIR each), e.g. a cluster HCCL hang")
    fleet.add_argument("scenario", choices=SCENARIOS,
                       help="hccl-hang: one job over every NPU; the culprit NPU's link goes down and it goes "
                            "silent, every other rank logs an EI0002 timeout naming it")
    fleet.add_argument("--culprit", required=True, metavar="NODE",
                       help="the culprit node: a DIR's name, or node-K for the K-th DIR")
    fleet.add_argument("--npu", type=int, required=True, metavar="N", help="the culprit NPU on that node")
    fleet.add_argument("--time", type=float, metavar="EPOCH", help="when the ranks time out (default: now)")
    fleet.add_argument("--peer-state", choices=("lost", "stuck"), default="lost",
                       help="what the victims' heartbeat lines say of the culprit (default lost)")
    fleet.add_argument("dirs", nargs="+", type=Path, metavar="DIR", help="the demo nodes' --demo-dir, in order")


def fault_list() -> str:
    """Every fault, what it does and its parameters: the epilog of ``demo set --help``."""
    lines = ["faults (chip and log faults need --npu N; --param KEY=VALUE sets a parameter):"]
    for name in sorted(FAULTS):
        spec = FAULTS[name]
        lines += textwrap.wrap(f"{name} ({spec.kind}): {spec.help}", 100, initial_indent="  ",
                               subsequent_indent="      ")
        for key, param in spec.params.items():
            default = "" if param.default is None else f", default {param.default}"
            lines += textwrap.wrap(f"{key}: {param.help} ({param.kind}{default})", 100, initial_indent="      ",
                                   subsequent_indent="        ")
    return "\n".join(lines)


def _fault_name(text: str) -> str:
    if text in FAULTS:
        return text
    near = difflib.get_close_matches(text, list(FAULTS), n=3, cutoff=0.6)
    hint = f"; did you mean {' or '.join(near)}?" if near else ""
    raise argparse.ArgumentTypeError(f"unknown fault {text!r}{hint} (`npuwatch demo set --help` lists them)")


def _fault_or_all(text: str) -> str:
    return text if text == "all" else _fault_name(text)


def _fail(message: str) -> int:
    print(f"npuwatch demo: {message}", file=sys.stderr)
    return EXIT_USAGE


def _fleet(args: argparse.Namespace) -> int:
    from agent.demo.fleet import hccl_hang

    if args.demo_dir is not None:
        return _fail("demo fleet takes the nodes' directories as arguments, not --demo-dir")
    try:
        summary = hccl_hang(args.dirs, args.culprit, args.npu, at=args.time, peer_state=args.peer_state)
    except ValueError as exc:
        return _fail(str(exc))
    print(json.dumps(summary, indent=2, sort_keys=True))
    return 0


def main(args: argparse.Namespace) -> int:
    from agent.demo.discovery import default_demo_dir, running_demo_dir
    from agent.demo.node import DemoNode

    if args.demo_command == "fleet":
        return _fleet(args)
    if args.demo_dir is None:
        args.demo_dir = running_demo_dir()
    if args.demo_dir is None:
        return _fail(f"no demo node in {default_demo_dir()}: start one with `npuwatch run --demo`, or give "
                     "--demo-dir DIR (the --demo-dir of `npuwatch run --demo`)")
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
