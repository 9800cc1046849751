"""Where a benchmark's processes run: CPU affinity for each tier, inherited by the processes started under it."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from dataclasses import dataclass


@dataclass(frozen=True)
class Placement:
    """The CPUs of each tier: ``fleet`` for the fleet-wide ruler (and its store), ``node`` for the rest."""
    node: frozenset[int]
    fleet: frozenset[int]

    @property
    def shared(self) -> bool:
        return self.node == self.fleet

    def describe(self) -> str:
        if self.shared:
            return f"every process on any of CPUs {sorted(self.node)}"
        return f"fleet tier on CPU {sorted(self.fleet)}, the rest on CPU {sorted(self.node)}"


def placement(shared: bool) -> Placement:
    cpus = frozenset(os.sched_getaffinity(0))
    if shared or len(cpus) < 2:
        return Placement(cpus, cpus)
    last = max(cpus)
    return Placement(cpus - {last}, frozenset({last}))


@contextlib.contextmanager
def on_cpus(cpus: frozenset[int]) -> Iterator[None]:
    """Processes started inside run on ``cpus``: a child inherits the affinity of the thread that forks it, and
    every thread it starts inherits its own (a Go runtime's threads included)."""
    before = os.sched_getaffinity(0)
    os.sched_setaffinity(0, cpus)
    try:
        yield
    finally:
        os.sched_setaffinity(0, before)
