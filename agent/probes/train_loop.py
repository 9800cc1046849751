"""Runs the synchronous CPU training loop (collectors/probes/train_loop.py): N gloo ranks on this host.

The job fail-slow's cpu backend watches where there is no NPU (docs/failslow.md, "CPU ranks"). Its ranks
go through the probes' own launcher and watchdog (``agent.probes.workers.run_workers``): each rank a child
in its own session with torchrun's rendezvous in its environment, killed with everything it started at
the deadline or when its peers fail.
"""

from __future__ import annotations

import os
import socket
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import collectors.probes
from agent.probes.records import EventHandler, RankReport
from agent.probes.workers import run_workers

__all__ = ["WORKER", "SlowDown", "TrainLoop", "rank_commands", "run_train_loop"]

WORKER = Path(collectors.probes.__file__).resolve().parent / "train_loop.py"


@dataclass(frozen=True)
class SlowDown:
    """Rank ``rank`` computes ``factor`` times as much each step from ``at_s`` seconds after its first step."""

    rank: int
    at_s: float
    factor: float


@dataclass(frozen=True)
class TrainLoop:
    """The job: ``ranks`` processes, ``duration_s`` of steps, each ``matmuls`` products of ``size`` square
    matrices then an all-reduce of ``grad_bytes``."""

    ranks: int = 8
    duration_s: float = 60.0
    size: int = 192
    matmuls: int = 20
    grad_bytes: int = 1 << 20
    slow: SlowDown | None = None
    python: str = sys.executable
    connect_timeout_s: float = 60.0


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def rank_commands(loop: TrainLoop, port: int, env: Mapping[str, str] | None = None
                  ) -> list[tuple[list[str], dict[str, str]]]:
    """Each rank's argv and environment: torchrun's variables, one thread each, rank 0's store on ``port``."""
    base = dict(os.environ if env is None else env)
    base.update(PYTHONUNBUFFERED="1", TORCH_DEVICE_BACKEND_AUTOLOAD="0", OMP_NUM_THREADS="1")
    argv = [loop.python, str(WORKER), "--backend", "cpu", "--duration", str(loop.duration_s),
            "--size", str(loop.size), "--matmuls", str(loop.matmuls), "--grad-bytes", str(loop.grad_bytes),
            "--connect-timeout", str(loop.connect_timeout_s)]
    if loop.slow is not None:
        argv += ["--slow-rank", str(loop.slow.rank), "--slow-at", str(loop.slow.at_s),
                 "--slow-factor", str(loop.slow.factor)]
    return [(argv, dict(base, RANK=str(rank), WORLD_SIZE=str(loop.ranks), LOCAL_RANK=str(rank),
                        LOCAL_WORLD_SIZE=str(loop.ranks), MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port)))
            for rank in range(loop.ranks)]


def run_train_loop(loop: TrainLoop, deadline_s: float, on_event: EventHandler | None = None,
                   term_grace_s: float = 3.0) -> tuple[Sequence[RankReport], str | None]:
    """Run the job to its end (or the deadline); the ranks' reports and why they were killed, if they were.
    ``on_event`` hears each rank's stage lines as they come (the slowed rank's carries ``slowed_at``)."""
    commands = rank_commands(loop, _free_port())
    return run_workers(commands, deadline_s, term_grace_s, on_event, stall_s=None)
