"""Golden text of ``npuwatch triage``: the scenarios, rendered in UTC, compared by tests/unit/test_triage_render.py.

Tests only compare. After a deliberate change to the engine or the rendering, regenerate with
``python -m tests.support.triage_golden`` and review the diff like any other change.
"""

from __future__ import annotations

import io
import os
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from agent.cli import build_parser
from agent.triage import command
from tests.support.golden import report_rewritten, write_if_changed
from tests.support.paths import FIXTURES
from tests.support.triage_scenarios import T0, Cluster

GOLDEN = FIXTURES / "triage"


def text_of(*argv: str) -> tuple[int, str]:
    args = build_parser().parse_args(["triage", "--jobs", "1", *argv])
    out = io.StringIO()
    return command.main(args, out=out, err=io.StringIO()), out.getvalue()


def dead_link(root: Path) -> tuple[int, str]:
    cluster = Cluster(root).write()
    cluster.link_down(2, 1, T0 - 330)
    dead = cluster.rank(2, 1)
    cluster.timeouts([r for r in range(cluster.size) if r != dead], T0, peers=[(cluster.device_ip(2, 1), dead)],
                     state="lost")
    cluster.cqe(cluster.rank(2, 0), T0 - 320, cluster.device_ip(2, 1))
    return text_of(*cluster.paths())


def two_incidents(root: Path) -> tuple[int, str]:
    first = Cluster(root, nodes=2, group="10.0.0.1%enp_60000_0_1").write()
    hung = first.rank(1, 2)
    first.timeouts([r for r in range(first.size) if r != hung], T0, peers=[(first.device_ip(1, 2), hung)],
                   state="stuck")
    first.noise(hung, T0 + 1200)
    second = Cluster(root, nodes=1, group="10.0.0.3%enp_60000_0_2", offset=2).write()
    second.timeouts(list(range(second.size)), T0 + 3000)
    return text_of(*first.paths(), *second.paths())


def no_incident(root: Path) -> tuple[int, str]:
    cluster = Cluster(root, nodes=2).write()
    return text_of(*cluster.paths(), "--since", "2025-10-24 09:00", "--until", "2025-10-24T11:00:00")


CASES: dict[str, Callable[[Path], tuple[int, str]]] = {
    "dead_link": dead_link,
    "two_incidents": two_incidents,
    "no_incident": no_incident,
}


def render(name: str, root: Path) -> tuple[int, str]:
    """The case's exit status and text, in UTC whatever this machine's zone (the caller restores it)."""
    os.environ["TZ"] = "UTC"
    time.tzset()
    return CASES[name](root)


def regenerate() -> list[Path]:
    changed: list[Path] = []
    for name in CASES:
        with tempfile.TemporaryDirectory() as tmp:
            _, text = render(name, Path(tmp))
        golden = GOLDEN / f"{name}.txt"
        write_if_changed(golden, text, changed)
    return changed


if __name__ == "__main__":
    report_rewritten(regenerate())
