"""Screenshots of the node page for docs/ (docs/node-page.md), from a demo node with faults.

    python -m tests.support.node_page_shots            # writes docs/images/node-page.png
    python -m tests.support.node_page_shots --out DIR  # elsewhere

A demo agent (8 chips) lives through an hour of demo time in a few minutes: the demo's clock and the
agent's are stepped together a minute at a time, each step one full collection round (every collector
group, then the judgement), as the agent's schedule would run them at their default intervals. NPU 2
reports an error code from 40 minutes before the end, NPU 4 runs hot from 25 minutes before it and NPU 6's
link goes down 8 minutes before it. The page is then served by the agent's own HTTP server and taken by
headless Chromium (tests.support.browser).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from agent.core.config import build_config
from agent.daemon.assemble import AgentBundle, build_agent
from agent.web.server import make_server
from tests.support import browser
from tests.support.agent_harness import fast_config
from tests.support.paths import REPO

__all__ = ["SimClock", "main", "shoot", "simulate"]

DEFAULT_OUT = REPO / "docs" / "images"
STEP_S = 60.0
# (minutes before the end, fault, chip, parameters)
SCRIPT: tuple[tuple[float, str, int, dict[str, object]], ...] = (
    (40.0, "health", 2, {"state": "Warning", "codes": ["80E18402"]}),
    (25.0, "hot", 4, {"celsius": 91.0}),
    (15.0, "hot", 4, {"celsius": 97.0}),
    (8.0, "link_down", 6, {}),
)


@dataclass
class SimClock:
    """The agent's clock, stepped by hand."""

    now: float

    def __call__(self) -> float:
        return self.now


def simulate(bundle: AgentBundle, clock: SimClock, minutes: float = 60.0,
             script: Sequence[tuple[float, str, int, dict[str, object]]] = SCRIPT) -> None:
    """Step the demo and the agent from ``minutes`` before ``clock.now`` to it, applying ``script``."""
    agent, demo = bundle.agent, bundle.demo
    assert demo is not None
    end = clock.now
    steps = int(minutes * 60 / STEP_S)
    pending = sorted(script, key=lambda item: -item[0])
    for step in range(steps + 1):
        at = end - (steps - step) * STEP_S
        clock.now = at
        demo.freeze_time(at)
        while pending and end - pending[0][0] * 60 <= at:
            _minutes, fault, chip, params = pending.pop(0)
            demo.set_fault(fault, chip=chip, **params)
        agent.collect_once()


def shoot(out_dir: Path, *, minutes: float = 60.0, window: tuple[int, int] = (1200, 900)) -> list[Path]:
    """Simulate, serve and take the page: the PNGs written."""
    import time

    out_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="npuwatch-shots-") as tmp:
        clock = SimClock(float(int(time.time())))
        # Tool timeouts of the defaults' size: a loaded machine must not put a timed-out tool in the picture.
        config = build_config(fast_config({"labels": {"node": "demo-node-01"},
                                           "collectors": {"npu_smi": {"timeout": "10s"},
                                                          "hccn_tool": {"timeout": "10s"}}}))
        bundle = build_agent(config, Path(tmp) / "demo", 8, clock=clock)
        try:
            simulate(bundle, clock, minutes)
            server = make_server("127.0.0.1", 0, bundle.agent.cache, bundle.agent.health,
                                 ready=bundle.agent.readiness, page=bundle.agent.node_page)
            server.start()
            try:
                url = f"http://127.0.0.1:{server.port}/"
                written = []
                for name, size in (("node-page.png", window),):
                    path = out_dir / name
                    run = browser.load(url, screenshot=path, window=size)
                    if run.console:
                        raise RuntimeError("the page logged to the console:\n" + "\n".join(run.console))
                    written.append(path)
                return written
            finally:
                server.stop()
        finally:
            bundle.agent.stop()


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.support.node_page_shots", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="directory for the PNGs (docs/images)")
    parser.add_argument("--minutes", type=float, default=60.0, help="demo time lived before the shot")
    args = parser.parse_args(argv)
    for path in shoot(args.out, minutes=args.minutes):
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
