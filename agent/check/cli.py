"""``npuwatch check`` and ``npuwatch check-baseline``: the arguments and what each command does.

Exit status of ``check``: Nagios by default (0 ok, 1 warn, 2 fail, 3 unknown), or with
``--exit-codes npd`` node-problem-detector's (0 OK, 1 NonOK, 2 Unknown; a warning is OK). With
``--exit-codes npd`` stdout is one line of at most 80 characters, the condition's message.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from agent.check.levels import CHECKS, CONDITIONS, LEVELS, SelectionError
from agent.check.report import EXIT_CODES, LevelReport
from agent.core.terminal import Style, add_color_option, use_color
from agent.health.windows import add_window_arguments

if TYPE_CHECKING:
    from agent.core.config import Config

__all__ = ["add_arguments", "add_baseline_arguments", "baseline_main", "main"]


def _names(text: str) -> tuple[str, ...]:
    return tuple(part.strip() for part in text.split(",") if part.strip())


_names.__name__ = "check list"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The flags of ``npuwatch check`` (the caller adds --config, --demo and the tool paths)."""
    parser.add_argument("--level", choices=LEVELS, default="quick",
                        help="quick: < 10 s, read-only, safe while jobs run; medium: < 2 min, idle NPUs "
                             "(GEMM, HBM and host bandwidth); long: < 15 min, idle (ascend-dmi, all-reduce, "
                             "chip-to-chip matrix, sustained GEMM). Default: quick")
    parser.add_argument("--json", action="store_true", help="every check with its value, threshold, basis and time")
    parser.add_argument("--exit-codes", dest="exit_codes", choices=tuple(EXIT_CODES), default="nagios",
                        help="nagios: 0 ok, 1 warn, 2 fail, 3 unknown (default); npd: 0 OK, 1 NonOK, 2 Unknown, "
                             "and stdout is the one-line message node-problem-detector shows")
    select = parser.add_mutually_exclusive_group()
    select.add_argument("--only", type=_names, default=(), metavar="CHECK[,CHECK]",
                        help=f"run only these checks (known: {', '.join(spec.name for spec in CHECKS)}; "
                             "dmi_diag_<item> for one ascend-dmi -dg item)")
    select.add_argument("--condition", choices=tuple(CONDITIONS),
                        help="run the checks behind one node-problem-detector condition")
    fleet = parser.add_mutually_exclusive_group()
    fleet.add_argument("--baseline", metavar="FILE", help="fleet medians (npuwatch check-baseline) to compare with")
    fleet.add_argument("--prometheus", metavar="URL", action="append",
                       help="take the fleet medians from this Prometheus (or VictoriaMetrics); repeat it for "
                            "each shard: the medians are taken over all of them")
    add_window_arguments(parser)
    parser.add_argument("--list", action="store_true", help="list the checks of each level and exit")
    add_color_option(parser)


def add_baseline_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("reports", nargs="*", metavar="REPORT.json",
                        help="`npuwatch check --json` outputs of the fleet's nodes (one per node)")
    parser.add_argument("--prometheus", metavar="URL", action="append",
                        help="take the medians from this Prometheus (or VictoriaMetrics) instead; repeat it for "
                             "each shard: the medians are taken over all of them")
    parser.add_argument("--output", "-o", metavar="FILE", help="write here (default: stdout)")


def _list_checks(stream: IO[str]) -> int:
    for level in LEVELS:
        stream.write(f"{level}:\n")
        for spec in CHECKS:
            if spec.level == level:
                stream.write(f"  {spec.name:<15} {spec.what}\n")
    stream.write("conditions:\n")
    for name, group in CONDITIONS.items():
        stream.write(f"  {name:<18} {', '.join(group)}\n")
    return 0


def _write(report: LevelReport, args: Any, stream: IO[str]) -> None:
    from agent.check.render import render_text, verdict_line

    style = args.exit_codes
    if args.json:
        json.dump(report.to_dict(style), stream, indent=2)
        stream.write("\n")
    elif style == "npd":
        stream.write(verdict_line(report) + "\n")
    else:
        stream.write(render_text(report, style, paint=Style(use_color(getattr(args, "color", None), stream))))


def main(args: Any, config: Config, demo_dir: Path | None, out: IO[str] | None = None) -> int:
    """Run one level and print it; returns the exit status in the chosen style."""
    from agent.check.baseline import BaselineError
    from agent.check.runner import RunOptions, run_level

    stream = out if out is not None else sys.stdout
    if getattr(args, "list", False):
        return _list_checks(stream)
    style = args.exit_codes
    tool_env = None
    if demo_dir is not None:
        from agent.check.demo import demo_setup

        config, tool_env = demo_setup(config, Path(demo_dir), int(getattr(args, "demo_chips", 8) or 8))
    options = RunOptions(level=args.level, only=args.only, condition=args.condition, baseline_file=args.baseline,
                         prometheus_url=args.prometheus, tool_env=tool_env, window_s=getattr(args, "window", None),
                         flap_window_s=getattr(args, "flap_window", None))
    try:
        report = run_level(config, options)
    except (SelectionError, BaselineError) as exc:
        message = f"UNKNOWN: {exc}"
        stream.write((message[:77] + "..." if len(message) > 80 and style == "npd" else message) + "\n")
        stream.flush()
        return EXIT_CODES[style]["unknown"]
    _write(report, args, stream)
    stream.flush()
    return report.exit_code(style)


def baseline_main(args: Any, out: IO[str] | None = None) -> int:
    """Build a baseline from check reports or from Prometheus; exit 0, or 2 when nothing could be read."""
    from agent.check.baseline import BaselineError, from_prometheus, from_reports

    stream = out if out is not None else sys.stdout
    if bool(args.reports) == bool(args.prometheus):
        print("npuwatch check-baseline: give REPORT.json files or --prometheus URL (one of the two)", file=sys.stderr)
        return 2
    try:
        if args.prometheus:
            baseline = from_prometheus(args.prometheus)
        else:
            documents = []
            for path in args.reports:
                with open(path, encoding="utf-8") as handle:
                    documents.append((path, json.load(handle)))
            baseline = from_reports(documents)
    except OSError as exc:  # a report that cannot be read: its name and why, in words
        print(f"npuwatch check-baseline: {exc.filename or ''}: {exc.strerror or exc}", file=sys.stderr)
        return 2
    except (ValueError, BaselineError) as exc:
        print(f"npuwatch check-baseline: {exc}", file=sys.stderr)
        return 2
    text = json.dumps(baseline.to_dict(), indent=2) + "\n"
    if args.output:
        Path(args.output).write_text(text, encoding="utf-8")
        count = sum(len(measures) for measures in baseline.models.values())
        print(f"{args.output}: {count} medians over {len(baseline.models)} models ({baseline.source})",
              file=sys.stderr)
    else:
        stream.write(text)
    return 0
