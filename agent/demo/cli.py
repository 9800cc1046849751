"""``npuwatch demo``: switch faults on a running demo node."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

__all__ = ["add_arguments", "main"]

FAULTS = (
    "health", "hbm_dbe", "hbm_sbe_rate", "vanish", "process",
    "npu_smi_hang", "npu_smi_crash", "npu_smi_garbage", "npu_smi_truncate",
    "link_down", "link_flap", "optics_no_light", "net_health_fail",
)


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
        params[key] = value.split(",") if key == "codes" else value
    return params


def main(args: argparse.Namespace) -> int:
    from agent.demo.state import DemoNode

    node = DemoNode(args.demo_dir)
    if args.demo_command == "set":
        node.set_fault(args.fault, chip=args.npu, **_params(args.param))
    elif args.demo_command == "clear":
        if args.fault == "all":
            node.clear_all()
        else:
            node.clear_fault(args.fault, chip=args.npu)
    state = node.read()
    print(json.dumps(getattr(state, "faults", None) or {}, indent=2, sort_keys=True, default=str))
    return 0
