"""The last incident window of one node's HCCL logs, as series a fleet query joins across nodes.

The log scanner (``collectors.hccl.collector``) feeds every chunk's communicator facts and culprit
hints here; ``samples()`` exports what is still current: the ranks of this node per communicator
(kept ``RANK_RETENTION_S``), communicator sizes, the local ranks that reported a failure in the
window, and the peers a hint near such a failure blames (same file, within
``hints.ATTACH_WINDOW_S``), each bounded (``MAX_*``; what a bound pushes out while current counts in
``npuwatch_hccl_incident_dropped_total``). The series and their labels: docs/hccl-log-formats.md.
"""

from __future__ import annotations

import hashlib
from collections import deque
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from collectors.base import Sample, label_pairs
from collectors.hccl.facts import CollectiveFailure, Communicator, Fact, InitTimeout, RankIdentity
from collectors.hccl.hints import ATTACH_WINDOW_S, Hint, blame_how, decode_peer

__all__ = [
    "DROP_SERIES",
    "MAX_BLAMED",
    "MAX_COMMS",
    "MAX_RANKS",
    "MAX_TIMEOUTS",
    "RANK_RETENTION_S",
    "IncidentWindow",
    "comm_label",
    "peer_of",
]

MAX_COMMS = 16
MAX_RANKS = 64
MAX_TIMEOUTS = 64
MAX_BLAMED = 32
MAX_COMM_LABEL = 128
RANK_RETENTION_S = 7 * 24 * 3600.0
DROP_SERIES = ("rank", "timeout", "blamed_peer")

_STREAM_FAILURES = 16
_STREAM_HINTS = 64
_STREAM_PIDS = 256


def comm_label(group: str) -> str:
    """The ``comm`` label of a group tag: the tag, or a bounded prefix + hash of a long one."""
    if len(group) <= MAX_COMM_LABEL:
        return group
    digest = hashlib.sha1(group.encode("utf-8", "surrogateescape")).hexdigest()[:16]  # noqa: S324 - a name, not security
    return f"{group[:MAX_COMM_LABEL - 17]}~{digest}"


def peer_of(hint: Hint, how: str | None = None) -> tuple[str, str] | None:
    """(rank, address) labels of the peer a hint blames, either may be ""; None when it names no peer."""
    peer = decode_peer(hint.kind, hint.value, how)
    if peer is None:
        return None
    return ("" if peer.rank is None else str(peer.rank)), peer.address or ""


@dataclass(frozen=True)
class _Blamed:
    """A peer one line blames: how, its rank and/or address, when (the line's time, else read time)."""

    how: str
    rank: str
    address: str
    at: float
    dated: bool


@dataclass
class _Stream:
    """What one log file said recently: failures to tie hints to, hints still waiting, ranks by pid."""

    failures: deque[tuple[str, float]] = field(default_factory=lambda: deque(maxlen=_STREAM_FAILURES))
    hints: deque[_Blamed] = field(default_factory=lambda: deque(maxlen=_STREAM_HINTS))
    pid_ranks: dict[tuple[int | None, str], tuple[int, int | None]] = field(default_factory=dict)


def _npu(value: int | None) -> str:
    return "" if value is None else str(value)


class IncidentWindow:
    """The bounded, expiring per-node view of recent HCCL incidents (see the module docstring)."""

    def __init__(self, window_s: float = 3600.0) -> None:
        if window_s <= 0:
            raise ValueError(f"incident window must be positive, got {window_s}")
        self.window_s = window_s
        # (comm, rank) -> (npu, seen at)
        self.ranks: dict[tuple[str, str], tuple[str, float]] = {}
        # comm -> ranks in it
        self.sizes: dict[str, int] = {}
        # (comm, rank) -> (npu, last failure at)
        self.timeouts: dict[tuple[str, str], tuple[str, float]] = {}
        # (comm, how, rank, address) -> last blamed at
        self.blamed: dict[tuple[str, str, str, str], float] = {}
        self.dropped: dict[str, int] = dict.fromkeys(DROP_SERIES, 0)
        self._streams: dict[str, _Stream] = {}

    # ------------------------------------------------------------ feeding

    def feed(self, stream_key: str, facts: Sequence[Fact], hints: Sequence[tuple[Hint, str]],
             read_at: float) -> None:
        """The facts and (hint, its line) pairs one chunk of one file gave, in line order, read at
        ``read_at``."""
        stream = self._streams.setdefault(stream_key, _Stream())
        new_failures: list[tuple[str, float]] = []
        for fact in facts:
            at = fact.timestamp if fact.timestamp is not None else read_at
            if isinstance(fact, RankIdentity):
                self._identity(stream, fact, at)
            elif isinstance(fact, Communicator):
                self._size(comm_label(fact.group), fact.rank_size)
            elif isinstance(fact, CollectiveFailure):
                failed = self._failure(stream, fact, at)
                if failed is not None:
                    new_failures.append(failed)
            elif isinstance(fact, InitTimeout):
                failed = self._init_timeout(stream, fact, at)
                if failed is not None:
                    new_failures.append(failed)
        stream.failures.extend(new_failures)
        for hint, line in hints:
            how = blame_how(hint.kind, line)
            peer = peer_of(hint, how)
            if peer is None or how is None:
                continue
            dated = hint.timestamp is not None
            blamed = _Blamed(how, *peer, hint.timestamp if hint.timestamp is not None else read_at, dated)
            comm = self._comm_for(stream, hint.timestamp, new_failures)
            if comm is not None:
                self._blame(comm, blamed)
            else:
                stream.hints.append(blamed)
        if new_failures:
            self._claim_waiting_hints(stream)

    def forget_stream(self, stream_key: str) -> None:
        """The file is gone: its joining memory goes (exported series stay until they expire)."""
        self._streams.pop(stream_key, None)

    def stream_keys(self) -> list[str]:
        return list(self._streams)

    def _identity(self, stream: _Stream, fact: RankIdentity, at: float) -> None:
        if not fact.group:
            return
        comm = comm_label(fact.group)
        self._size(comm, fact.rank_size)
        key = (comm, str(fact.rank))
        npu = _npu(fact.device)
        previous = self.ranks.get(key)
        if previous is not None:
            npu = npu or previous[0]
            at = max(at, previous[1])
        self._put(self.ranks, key, (npu, at), "rank", MAX_RANKS)
        pid_key = (fact.pid, comm)
        stream.pid_ranks.pop(pid_key, None)
        stream.pid_ranks[pid_key] = (fact.rank, fact.device)
        while len(stream.pid_ranks) > _STREAM_PIDS:
            del stream.pid_ranks[next(iter(stream.pid_ranks))]

    def _size(self, comm: str, size: int | None) -> None:
        if size is not None and size > 0:
            self.sizes[comm] = size

    def _failure(self, stream: _Stream, fact: CollectiveFailure, at: float) -> tuple[str, float] | None:
        if not fact.group:
            return None
        comm = comm_label(fact.group)
        self._size(comm, fact.rank_size)
        if fact.rank is not None:
            npu = _npu(fact.device) or self.ranks.get((comm, str(fact.rank)), ("", 0.0))[0]
            self._timeout(comm, str(fact.rank), npu, at)
        if fact.remote_rank is not None:
            self._blame(comm, _Blamed("waited_on", str(fact.remote_rank), "", at, True))
        return comm, at

    def _init_timeout(self, stream: _Stream, fact: InitTimeout, at: float) -> tuple[str, float] | None:
        if not fact.group:
            return None
        comm = comm_label(fact.group)
        self._size(comm, fact.expected)
        own = stream.pid_ranks.get((fact.pid, comm))
        if own is not None:
            rank, device = own
            self._timeout(comm, str(rank), _npu(device), at)
        for rank in fact.missing or ():
            self._blame(comm, _Blamed("missing", str(rank), "", at, True))
        return comm, at

    def _timeout(self, comm: str, rank: str, npu: str, at: float) -> None:
        key = (comm, rank)
        previous = self.timeouts.get(key)
        if previous is not None:
            npu, at = npu or previous[0], max(at, previous[1])
        self._put(self.timeouts, key, (npu, at), "timeout", MAX_TIMEOUTS)

    def _blame(self, comm: str, blamed: _Blamed) -> None:
        key = (comm, blamed.how, blamed.rank, blamed.address)
        self._put(self.blamed, key, max(blamed.at, self.blamed.get(key, blamed.at)), "blamed_peer", MAX_BLAMED)

    def _comm_for(self, stream: _Stream, at: float | None,
                  new_failures: Sequence[tuple[str, float]]) -> str | None:
        """The communicator of the failure nearest to a hint printed at ``at`` in the same file."""
        if at is None:  # no time of its own: the failure of this chunk, else none
            return new_failures[-1][0] if new_failures else None
        near = [(abs(when - at), comm) for comm, when in stream.failures if abs(when - at) <= ATTACH_WINDOW_S]
        near += [(abs(when - at), comm) for comm, when in new_failures if abs(when - at) <= ATTACH_WINDOW_S]
        return min(near)[1] if near else None

    def _claim_waiting_hints(self, stream: _Stream) -> None:
        waiting, stream.hints = stream.hints, deque(maxlen=_STREAM_HINTS)
        for blamed in waiting:
            comm = self._comm_for(stream, blamed.at if blamed.dated else None, ())
            if comm is not None:
                self._blame(comm, blamed)
            else:
                stream.hints.append(blamed)

    # ------------------------------------------------------------ bounds

    def _put(self, table: dict[Any, Any], key: tuple[str, ...], value: Any, series: str, cap: int) -> None:
        """Store ``value`` under ``key`` unless the bounds push it (or something older) out."""
        at = _time_of(value)
        comm = key[0]
        if comm not in self._comms() and len(self._comms()) >= MAX_COMMS:
            oldest = min(self._comms(), key=self._activity)
            if self._activity(oldest) > at:
                self.dropped[series] += 1
                return
            self._evict_comm(oldest)
        if key not in table and len(table) >= cap:
            oldest_key = min(table, key=lambda k: _time_of(table[k]))
            if _time_of(table[oldest_key]) > at:
                self.dropped[series] += 1
                return
            del table[oldest_key]
            self.dropped[series] += 1
        table[key] = value

    def _comms(self) -> set[str]:
        return ({comm for comm, _ in self.ranks} | {comm for comm, _ in self.timeouts}
                | {key[0] for key in self.blamed})

    def _activity(self, comm: str) -> float:
        times = [at for (c, _), (_, at) in self.ranks.items() if c == comm]
        times += [at for (c, _), (_, at) in self.timeouts.items() if c == comm]
        times += [at for key, at in self.blamed.items() if key[0] == comm]
        return max(times, default=float("-inf"))

    def _evict_comm(self, comm: str) -> None:
        tables: tuple[tuple[str, dict[Any, Any]], ...] = (
            ("rank", self.ranks), ("timeout", self.timeouts), ("blamed_peer", self.blamed))
        for series, table in tables:
            for key in [k for k in table if k[0] == comm]:
                del table[key]
                self.dropped[series] += 1
        self.sizes.pop(comm, None)

    def expire(self, now: float) -> None:
        """Forget what is older than its retention (not counted as dropped)."""
        horizon = now - self.window_s
        self.ranks = {k: v for k, v in self.ranks.items() if v[1] >= now - max(RANK_RETENTION_S, self.window_s)}
        self.timeouts = {k: v for k, v in self.timeouts.items() if v[1] >= horizon}
        self.blamed = {k: v for k, v in self.blamed.items() if v >= horizon}
        live = self._comms()
        self.sizes = {comm: size for comm, size in self.sizes.items() if comm in live}
        for stream in self._streams.values():
            cutoff = horizon - ATTACH_WINDOW_S
            while stream.hints and stream.hints[0].at < cutoff:
                stream.hints.popleft()

    # ------------------------------------------------------------ exporting

    def samples(self, now: float) -> list[Sample]:
        """The current series (expired entries dropped first); pure apart from expiring."""
        self.expire(now)
        out = [Sample("npu_hccl_rank_last_seen_timestamp_seconds", label_pairs(comm=comm, rank=rank, npu=npu), at)
               for (comm, rank), (npu, at) in sorted(self.ranks.items())]
        out += [Sample("npu_hccl_comm_ranks", label_pairs(comm=comm), float(size))
                for comm, size in sorted(self.sizes.items())]
        out += [Sample("npu_hccl_rank_timeout_timestamp_seconds", label_pairs(comm=comm, rank=rank, npu=npu), at)
                for (comm, rank), (npu, at) in sorted(self.timeouts.items())]
        out += [Sample("npu_hccl_peer_blamed_timestamp_seconds",
                       label_pairs(comm=comm, how=how, rank=rank, address=address), at)
                for (comm, how, rank, address), at in sorted(self.blamed.items())]
        out += [Sample("npuwatch_hccl_incident_dropped_total", label_pairs(series=series), float(count))
                for series, count in sorted(self.dropped.items())]
        return out

    # ------------------------------------------------------------ state across restarts

    def state(self) -> dict[str, Any]:
        return {
            "ranks": [[comm, rank, npu, at] for (comm, rank), (npu, at) in sorted(self.ranks.items())],
            "sizes": dict(sorted(self.sizes.items())),
            "timeouts": [[comm, rank, npu, at] for (comm, rank), (npu, at) in sorted(self.timeouts.items())],
            "blamed": [[*key, at] for key, at in sorted(self.blamed.items())],
        }

    def restore(self, state: Any) -> None:
        """Load ``state()``'s output; anything malformed leaves the window empty."""
        try:
            ranks = {(str(c), str(r)): (str(n), float(t)) for c, r, n, t in _rows(state, "ranks")}
            timeouts = {(str(c), str(r)): (str(n), float(t)) for c, r, n, t in _rows(state, "timeouts")}
            blamed = {(str(c), str(h), str(r), str(a)): float(t) for c, h, r, a, t in _rows(state, "blamed")}
            sizes = {str(c): int(s) for c, s in dict(state.get("sizes") or {}).items()}
        except (TypeError, ValueError, AttributeError):
            return
        self.ranks = dict(list(ranks.items())[:MAX_RANKS])
        self.timeouts = dict(list(timeouts.items())[:MAX_TIMEOUTS])
        self.blamed = dict(list(blamed.items())[:MAX_BLAMED])
        self.sizes = sizes


def _rows(state: Any, key: str) -> Iterable[Any]:
    rows = state.get(key) or []
    if not isinstance(rows, list):
        raise TypeError(key)
    return rows


def _time_of(value: Any) -> float:
    """The time of a table value: a bare time, or the last item of an (npu, time) pair."""
    return float(value[1]) if isinstance(value, tuple) else float(value)
