"""What the flight-recorder dumps of one process group say: who stopped, who went another way.

Per process group (``FlightRecord.group``, the same name on every rank), compare the ranks:

- **hang**: the newest collective a rank entered (``last_enqueued``; gloo in torch 2.13 leaves
  every entry ``scheduled`` and ``last_completed`` unreliable, so only entering is compared) is
  behind the others'. The rank furthest behind never entered the next collective: it is stuck
  (in compute, in I/O, or dead) while the others wait in that collective.
- **desync**: at one sequence number the ranks entered different collectives (operation, or
  input sizes and dtypes). The ranks outside the majority are the odd ones; with no majority
  (two ranks, one each) every side is named, at lower confidence.
- ranks the group lists that left no dump are named, weakly: a dead process dumps nothing.

When every rank entered the same collectives, the group is clean (a job that ended, or one that
hangs for a reason the recorder cannot see) and nothing is reported.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from agent.triage.evidence import FlightEntry, FlightRecord
from agent.triage.weights import WEIGHTS

__all__ = ["FlightCulprit", "FlightFinding", "analyze_flights", "rank_ranges"]



@dataclass(frozen=True)
class FlightCulprit:
    rank: int
    node: str | None
    cause: str  # process_hang, desync, unknown
    score: float
    text: str


@dataclass(frozen=True)
class FlightFinding:
    group: str
    desc: str
    ranks: tuple[int, ...]  # ranks with a dump
    expected: tuple[int, ...]  # the group's ranks (from its config, else the dumps)
    seq: int  # the collective where the ranks part
    op: str | None
    at: float | None  # when the first rank entered it
    reached: tuple[int, ...]  # ranks that entered it
    kind: str  # hang | desync
    culprits: tuple[FlightCulprit, ...]

    @property
    def label(self) -> str:
        return f"process group {self.group}" + (f" ({self.desc})" if self.desc else "")


def rank_ranges(ranks: Iterable[int]) -> str:
    """``0-3,5,7-8``."""
    ordered = sorted(set(ranks))
    parts: list[str] = []
    start = prev = None
    for rank in ordered:
        if start is None:
            start = prev = rank
        elif prev is not None and rank == prev + 1:
            prev = rank
        else:
            parts.append(f"{start}" if start == prev else f"{start}-{prev}")
            start = prev = rank
    if start is not None:
        parts.append(f"{start}" if start == prev else f"{start}-{prev}")
    return ",".join(parts)


def _ranks_text(ranks: Iterable[int]) -> str:
    listed = sorted(set(ranks))
    return f"rank {listed[0]}" if len(listed) == 1 else f"ranks {rank_ranges(listed)}"


def _collectives(record: FlightRecord) -> dict[int, FlightEntry]:
    found: dict[int, FlightEntry] = {}
    for entry in record.entries:
        if not entry.p2p:
            found.setdefault(entry.seq, entry)
    return found


def _last(record: FlightRecord, seqs: dict[int, FlightEntry]) -> int | None:
    if record.last_enqueued is not None:
        return record.last_enqueued
    return max(seqs, default=None)


def _choose(records: Sequence[FlightRecord]) -> dict[int, FlightRecord]:
    """One record per rank: a rank dumped twice (JSON and pickle) keeps the fuller dump."""
    chosen: dict[int, FlightRecord] = {}
    for record in records:
        current = chosen.get(record.rank)
        if current is None or len(record.entries) > len(current.entries):
            chosen[record.rank] = record
    return chosen


def _hang(group: str, desc: str, by_rank: dict[int, FlightRecord], seqs: dict[int, dict[int, FlightEntry]],
          expected: tuple[int, ...]) -> FlightFinding | None:
    last = {rank: _last(record, seqs[rank]) for rank, record in by_rank.items()}
    known = {rank: value for rank, value in last.items() if value is not None}
    if len(known) < 2:
        return None
    top = max(known.values())
    floor = min(known.values())
    if floor == top:
        return None
    stuck_at = floor + 1
    reached = tuple(sorted(rank for rank, value in known.items() if value >= stuck_at))
    entries = [seqs[rank][stuck_at] for rank in reached if stuck_at in seqs[rank]]
    op = Counter(entry.op for entry in entries).most_common(1)[0][0] if entries else None
    times = [entry.at for entry in entries if entry.at is not None]
    at = min(times) if times else None
    culprits = []
    for rank, value in sorted(known.items(), key=lambda item: (item[1], item[0])):
        if value >= top:
            continue
        furthest = value == floor
        entered = f"collective {value}" if value > 0 else "no collective"
        what = f"{op} " if op else ""
        text = (f"flight recorder: rank {rank} last entered {entered}; {_ranks_text(reached)} entered "
                f"{what}collective {stuck_at}" + ("" if furthest else " (not the furthest behind)"))
        culprits.append(FlightCulprit(rank, by_rank[rank].node, "process_hang",
                                      WEIGHTS["flight_hang"] if furthest else WEIGHTS["flight_weak"], text))
    culprits.extend(_no_dump(by_rank, expected))
    return FlightFinding(group, desc, tuple(sorted(by_rank)), expected, stuck_at, op, at, reached, "hang",
                         tuple(culprits))


def _desync(group: str, desc: str, by_rank: dict[int, FlightRecord], seqs: dict[int, dict[int, FlightEntry]],
            expected: tuple[int, ...]) -> FlightFinding | None:
    common: dict[int, dict[int, FlightEntry]] = defaultdict(dict)
    for rank, entries in seqs.items():
        for seq, entry in entries.items():
            common[seq][rank] = entry
    for seq in sorted(common):
        at_seq = common[seq]
        if len(at_seq) < 2:
            continue
        signatures = Counter((entry.op, entry.sizes) for entry in at_seq.values())
        if len(signatures) < 2:
            continue
        (top_sig, top_count), (_, second_count) = signatures.most_common(2)
        majority = top_sig if top_count > second_count else None
        odd = sorted(rank for rank, entry in at_seq.items() if (entry.op, entry.sizes) != majority)
        culprits = []
        for rank in odd:
            entry = at_seq[rank]
            others = [r for r in at_seq if (at_seq[r].op, at_seq[r].sizes) != (entry.op, entry.sizes)]
            other_ops = sorted({str(at_seq[r].op) for r in others})
            if entry.op in other_ops:  # same operation, other shapes
                other_sizes = sorted({at_seq[r].sizes for r in others})
                detail = (f"flight recorder: at collective {seq} rank {rank} called {entry.op} with {entry.sizes}, "
                          f"{_ranks_text(others)} with {' / '.join(other_sizes)}")
            else:
                detail = (f"flight recorder: at collective {seq} rank {rank} called {entry.op}, "
                          f"{_ranks_text(others)} called {'/'.join(other_ops)}")
            weight = WEIGHTS["flight_desync"] if majority is not None else WEIGHTS["flight_weak"]
            culprits.append(FlightCulprit(rank, by_rank[rank].node, "desync", weight, detail))
        culprits.extend(_no_dump(by_rank, expected))
        times = [entry.at for entry in at_seq.values() if entry.at is not None]
        op = majority[0] if majority is not None else None
        reached = tuple(sorted(at_seq))
        return FlightFinding(group, desc, tuple(sorted(by_rank)), expected, seq, op, min(times) if times else None,
                             reached, "desync", tuple(culprits))
    return None


def _no_dump(by_rank: dict[int, FlightRecord], expected: tuple[int, ...]) -> list[FlightCulprit]:
    return [FlightCulprit(rank, None, "unknown", WEIGHTS["flight_no_dump"],
                          f"flight recorder: no dump from rank {rank} (a process that died dumps nothing)")
            for rank in expected if rank not in by_rank]


def analyze_flights(records: Iterable[FlightRecord]) -> list[FlightFinding]:
    """One finding per process group whose ranks disagree (a desync is checked before a hang)."""
    groups: dict[str, list[FlightRecord]] = defaultdict(list)
    for record in records:
        groups[record.group].append(record)
    findings = []
    for group, members in sorted(groups.items()):
        by_rank = _choose(members)
        seqs = {rank: _collectives(record) for rank, record in by_rank.items()}
        desc = next((record.group_desc for record in members if record.group_desc), "")
        listed = next((record.group_ranks for record in members if record.group_ranks), None)
        expected = tuple(listed) if listed and set(by_rank) <= set(listed) else tuple(sorted(by_rank))
        finding = _desync(group, desc, by_rank, seqs, expected) or _hang(group, desc, by_rank, seqs, expected)
        if finding is not None:
            findings.append(finding)
    return findings
