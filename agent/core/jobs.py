"""Collectors without an external tool (host metrics, log scanner, probe results, textfile)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from collectors.base import Sample

__all__ = ["InternalJob", "Sampler"]


@dataclass(frozen=True)
class InternalJob:
    """A collector with no external tool (host metrics, log scanner, probes)."""

    name: str
    interval_s: float
    collect: Callable[[], Sequence[Sample]]
    max_age_s: float | None = -1.0
    # Why the job is degraded though it still collects (e.g. its state file is unwritable).
    problem: Callable[[], str | None] | None = None
    # What the job read, kept as its snapshot's records for other jobs (the HCCL logs' window for the verdict);
    # called right after ``collect``, in its thread.
    records: Callable[[], Any] | None = None


@dataclass(frozen=True)
class Sampler:
    """A reading taken between a collector's runs for that collector's next one (the busy fraction's reads of
    ``npu_fast``): read on its interval by the samplers' thread (agent/core/samplers.py), nothing stored, no
    collector of its own; ``read`` never raises for what it reads (its collector reports that)."""

    name: str
    interval_s: float
    read: Callable[[], None]
