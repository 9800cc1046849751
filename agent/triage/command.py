"""``npuwatch triage PATH... [--rank-table FILE] [--since T] [--until T] [--json] [--jobs N]``, or
``npuwatch triage --prometheus URL [--prometheus URL...] [--since 1h]`` (``agent.triage.prometheus``: the
same analysis from the fleet's series, every server's joined as one fleet; PATHs given too are read beside it).

PATH: bundles written by ``npuwatch bundle`` or plain directories (one node each; bundles found
inside a directory are inputs of their own). ``--since``/``--until`` take a duration back from
now (``2h``, ``30m``), a local time (``2025-10-24 10:00``, ``2025-10-24T10:00:00``) or epoch
seconds; without them the window is everything in the inputs.

Exit status: the lead verdict's (``agent.triage.verdict``), as for ``check``: 0 ok (no incident, no local
fault), 1 warn (local faults that warn), 2 fail (a culprit named, or a local fault that fails), 3 unknown (an
incident whose culprit is not named, or nothing readable); 2 for a bad option, as argparse does.
"""

from __future__ import annotations

import os
import sys
import time
from datetime import datetime
from typing import IO, Any

from agent.core.config_values import parse_duration
from agent.core.printable import printable
from agent.triage.engine import analyze
from agent.triage.evidence import Evidence, Window
from agent.triage.inputs import read_inputs, read_rank_table
from agent.triage.render import render_json, render_text

__all__ = ["main", "parse_time", "window_from_args"]

EXIT_BAD_OPTION = 2


def parse_time(text: str, now: float | None = None) -> float:
    """``2h`` (ago), ``2025-10-24 10:00[:00]``, ``2025-10-24T10:00``, or epoch seconds."""
    now = time.time() if now is None else now
    value = text.strip()
    if value.replace(".", "", 1).isdigit() and len(value.split(".")[0]) >= 9:
        return float(value)
    try:
        return now - parse_duration(value)
    except ValueError:
        pass
    try:
        return datetime.fromisoformat(value).timestamp()
    except ValueError:
        raise ValueError(f"{text!r} is neither a duration (2h), a time (2025-10-24 10:00) nor epoch seconds") from None


def window_from_args(args: Any, now: float | None = None) -> Window:
    since = getattr(args, "since", None)
    until = getattr(args, "until", None)
    return Window(parse_time(since, now) if since else None, parse_time(until, now) if until else None)


class _Progress:
    """One line per input read, on a terminal only."""

    def __init__(self, stream: IO[str], total: int) -> None:
        self.stream = stream
        self.total = total
        self.done = 0
        self.enabled = stream.isatty()

    def __call__(self, path: str, evidence: Evidence) -> None:
        self.done += 1
        self.total = max(self.total, self.done)  # bundles found inside directories add inputs
        if not self.enabled:
            return
        size = sum(c.bytes for c in evidence.nodes.values())
        nodes = ", ".join(sorted(evidence.nodes)) or "nothing readable"
        self.stream.write(f"\r[{self.done}/{self.total}] {printable(path)}: {printable(nodes)}, {size / 1e6:.1f} MB"
                          "\x1b[K")
        if self.done == self.total:
            self.stream.write("\n")
        self.stream.flush()


def main(args: Any, out: IO[str] | None = None, err: IO[str] | None = None) -> int:
    stream = out if out is not None else sys.stdout
    errors = err if err is not None else sys.stderr
    try:
        window = window_from_args(args)
    except ValueError as exc:
        errors.write(f"npuwatch triage: {printable(exc)}\n")
        return EXIT_BAD_OPTION
    prometheus = getattr(args, "prometheus", None)
    if not args.paths and not prometheus:
        errors.write("npuwatch triage: give bundles or directories (PATH...), or --prometheus URL (repeatable)\n")
        return EXIT_BAD_OPTION
    evidence = Evidence()
    if args.paths:
        jobs = getattr(args, "jobs", None) or min(len(args.paths), os.cpu_count() or 1)
        evidence = read_inputs(list(args.paths), jobs=jobs, progress=_Progress(errors, len(args.paths)))
    if prometheus:
        from agent.triage import prometheus as online

        try:
            sources = online.sources_from_args(args)
            window = online.closed_window(window, time.time())
        except ValueError as exc:
            errors.write(f"npuwatch triage: {printable(exc)}\n")
            return EXIT_BAD_OPTION
        evidence.extend(online.read_fleet(sources, window))
    if getattr(args, "rank_table", None):
        addresses, problems = read_rank_table(args.rank_table)
        evidence.addresses.extend(addresses)
        evidence.problems.extend(problems)
    report = analyze(evidence, window)
    if getattr(args, "json", False):
        render_json(report, stream)
    else:
        stream.write(render_text(report))
    stream.flush()
    return report.exit_code
