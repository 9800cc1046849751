"""Communicator facts: the records of who is which rank of which communicator, what each rank was doing when it
failed, and who never reached the rendezvous (``comm.CommFactParser`` reads them off the logs).

A cluster triage engine joins these across nodes: the communicator name (``group``) is the same on
every rank of one communicator, so ``(group, rank)`` identifies a rank cluster-wide, and ``pid`` /
``device`` / ``server`` say where it ran. Times are epoch seconds of the local time the node printed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Union

__all__ = [
    "CollectiveFailure",
    "CollectiveOp",
    "Communicator",
    "Fact",
    "InitTimeout",
    "RankIdentity",
    "RootInfoCreated",
    "WatchdogTimeout",
]


@dataclass(frozen=True)
class RankIdentity:
    """One rank of one communicator and where it ran. ``device`` is the logical device id."""

    group: str | None
    rank: int
    rank_size: int | None = None
    device: int | None = None
    pid: int | None = None
    server: str | None = None
    device_phy: int | None = None
    device_ip: str | None = None
    root: str | None = None
    timestamp: float | None = None
    shape: str = ""
    line_no: int = 0


@dataclass(frozen=True)
class Communicator:
    """A communicator as its process describes it (``[Communicator Key Info]``)."""

    group: str
    rank_size: int | None = None
    server_count: int | None = None
    pid: int | None = None
    timestamp: float | None = None
    line_no: int = 0


@dataclass(frozen=True)
class RootInfoCreated:
    """``HcclGetRootInfo`` was called: this process hosts a rendezvous server."""

    pid: int | None
    device: int | None = None
    timestamp: float | None = None
    line_no: int = 0


@dataclass(frozen=True)
class CollectiveOp:
    """One collective call as logged with HCCL_ENTRY_LOG_ENABLE=1. ``rank`` is ``localRank``."""

    op: str
    group: str | None
    tag: str
    rank: int | None = None
    count: int | None = None
    data_type: str | None = None
    reduce_op: str | None = None
    stream: int | None = None
    comm: str | None = None
    device: int | None = None
    pid: int | None = None
    timestamp: float | None = None
    line_no: int = 0


@dataclass(frozen=True)
class CollectiveFailure:
    """The collective a rank was running when its task failed (one failure block).

    ``timestamp`` is when the failure was printed, ``issued_at`` when the operation was issued
    (opData ``timeStamp``); ``index`` is the operation's sequence number in its communicator.
    """

    group: str | None
    op: str | None
    rank: int | None
    timestamp: float | None
    stream: int | None = None
    task: int | None = None
    index: int | None = None
    device: int | None = None
    tag: str | None = None
    rank_size: int | None = None
    remote_rank: int | None = None
    task_type: str | None = None
    issued_at: float | None = None
    count: int | None = None
    data_type: str | None = None
    pid: int | None = None
    line_no: int = 0


@dataclass(frozen=True)
class InitTimeout:
    """Communicator init (rendezvous) timed out; ``role`` is ``root`` (the server) or ``agent``.

    ``connected`` / ``missing`` are rank ids; ``root`` is the rendezvous server as ``ip:port``.
    """

    role: str
    group: str | None = None
    expected: int | None = None
    connected: tuple[int, ...] | None = None
    missing: tuple[int, ...] | None = None
    root: str | None = None
    timeout_s: float | None = None
    pid: int | None = None
    timestamp: float | None = None
    line_no: int = 0


@dataclass(frozen=True)
class WatchdogTimeout:
    """torch_npu's watchdog gave up on a collective of (global) ``rank``."""

    rank: int
    seq: int
    op: str
    timeout_s: float
    elapsed_s: float | None = None
    timestamp: float | None = None
    line_no: int = 0


# typing.Union, not "|": this alias is evaluated at run time, and Python 3.9 has no "|" on classes.
Fact = Union[RankIdentity, Communicator, RootInfoCreated, CollectiveOp, CollectiveFailure, InitTimeout,
             WatchdogTimeout]
