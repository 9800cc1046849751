"""Verdicts printed by flight-recorder analyzers, for when triage is handed their output instead of dumps.

PyTorch's ``fr_trace`` (``torchfrtrace``, ``python -m torch.distributed.flight_recorder.fr_trace``)
prints one block per suspicious collective. The header changed over releases::

    Not all ranks joining collective 5 at entry 4                 (2.5)
    Not all ranks joining collective: sequence number: 31117      (late 2024)
    Not all ranks joining collective, sequence number: 5          (2.13)
    Collective sequence number: 5 has errors                      (type/size/dtype/state mismatch)
    Input/output mismatch in the collective sequence number: 5    (all_to_all sizes)

followed by ``key: value`` lines (``internal record id``, ``group info: 0:default_pg``, ``collective``,
``missing ranks: {3, 4}``, ``input sizes``, ``output sizes``, ``world size``, ``expected ranks`` (a count in
2.5, a set later), ``collective state``, ``error msg: Culprit rank 0; Error type: ..., Culprit rank 2; ...``)
and ``collective stack trace:`` with one frame per line. The note ``We cannot decide what's wrong ...
missed FR dumps from ranks ({...})`` becomes a ``missing_dumps`` finding.

Ascend's ``analysis_flight.py`` (torch_npu) logs ``%(asctime)s - %(levelname)s - %(message)s`` lines; the
message is ``Path: ...``, ``World Size: N`` or one verdict per process group:

- ``The pg_id P's Communication Operator OP executed too slowly, causing the HCCL to time out.``
- ``The pg_id P's rank R's Computational task took too long, causing the other ranks' HCCL task to
  time out.`` (the script prints the entry's pg_id where it says rank R; kept as printed)
- ``The computational task of the pg_id P after the communication operator OP took too long.``
- ``The situation cannot be recognized!``
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Literal

from collectors.base import ParseError

__all__ = ["FlightVerdict", "FrAnalysis", "FrTraceFinding", "parse"]

FindingKind = Literal["missing_ranks", "collective_errors", "size_mismatch", "missing_dumps"]
VerdictKind = Literal["slow_collective", "slow_compute", "slow_after_collective", "unrecognized"]

_HEADERS: tuple[tuple[re.Pattern[str], FindingKind], ...] = (
    (re.compile(r"^Not all ranks joining collective (?P<seq>\d+) at entry (?P<entry>\d+)$"), "missing_ranks"),
    (re.compile(r"^Not all ranks joining collective[:,] sequence number: (?P<seq>\d+)$"), "missing_ranks"),
    (re.compile(r"^Collective sequence number: (?P<seq>\d+) has errors$"), "collective_errors"),
    (re.compile(r"^Input/output mismatch in the collective sequence number: (?P<seq>\d+)$"), "size_mismatch"),
)
_MISSING_DUMPS_RE = re.compile(r"^We cannot decide what's wrong with this collective entry because we missed FR "
                               r"dumps from ranks \((?P<ranks>.*?)\)")
# Lines fr_trace prints outside a finding (from its source); anything else there is kept as unparsed.
_NOTES = tuple(re.compile(pattern) for pattern in (
    r"^tabulate is not installed\. Proceeding without it\.$",
    r"^No errors found for this collective entry",
    r"^Too many mismatches for process_group ",
    r"^Rank \d+ has an empty op list\.$",
    r"^Rank \d+ does not have a coalesced end\.$",
))
# What Python's warnings module prints to stderr (``path.py:12: UserWarning: ...`` then the indented source
# line); an analyzer run without numpy, say, interleaves these with its verdicts.
_PYTHON_WARNING_RE = re.compile(r"^\S.*\.py:\d+: [A-Za-z]*Warning: ")
_FIELD_RE = re.compile(r"^(?P<key>[a-z][a-z ]*[a-z]): ?(?P<value>.*)$")
_STACK_KEY = "collective stack trace"
_FRAME_RE = re.compile(r"^\S.* at \S.*:\d+$")
_CULPRIT_RE = re.compile(r"Culprit rank (?P<rank>\d+); ")
_LOG_RE = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} - (?P<level>[A-Z]+) - (?P<message>.*)$")
_VERDICTS: tuple[tuple[re.Pattern[str], VerdictKind], ...] = (
    (re.compile(r"^The pg_id (?P<pg>\S+)'s Communication Operator (?P<op>.*) executed too slowly, "
                r"causing the HCCL to time out\.$"), "slow_collective"),
    (re.compile(r"^The pg_id (?P<pg>\S+)'s rank (?P<rank>\d+)'s Computational task took too long, "
                r"causing the other ranks' HCCL task to time out\.$"), "slow_compute"),
    (re.compile(r"^The computational task of the pg_id (?P<pg>\S+) after the communication operator "
                r"(?P<op>.*) took too long\.$"), "slow_after_collective"),
    (re.compile(r"^The situation cannot be recognized!$"), "unrecognized"),
)


def _rank_set(text: str) -> frozenset[int]:
    """``{3, 4}`` / ``[3, 4]`` / ``set()`` -> frozenset; ParseError on anything else."""
    body = text.strip()
    if body == "set()":
        return frozenset()
    if not re.fullmatch(r"[{\[]\s*(?:\d+\s*(?:,\s*\d+\s*)*)?[}\]]", body):
        raise ParseError(f"not a set of ranks: {text!r}")
    return frozenset(int(rank) for rank in re.findall(r"\d+", body))


@dataclass(frozen=True)
class FrTraceFinding:
    kind: FindingKind
    collective_seq: int | None
    entry_index: int | None = None  # "at entry N" (2.5 wording)
    record_id: int | None = None  # "internal record id"
    group: str | None = None  # "0:default_pg"
    collective: str | None = None  # "nccl:all_reduce"
    missing_ranks: frozenset[int] | None = None
    expected_ranks: frozenset[int] | None = None
    expected_rank_count: int | None = None  # 2.5 prints only a count; later a set (its size here too)
    world_size: int | None = None
    state: str | None = None
    input_sizes: str | None = None
    output_sizes: str | None = None
    culprit_ranks: frozenset[int] = frozenset()
    error_text: str | None = None
    stack: tuple[str, ...] = ()
    extra: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class FlightVerdict:
    kind: VerdictKind
    pg_id: str | None
    operator: str | None = None
    rank: int | None = None
    sentence: str = ""


@dataclass(frozen=True)
class FrAnalysis:
    tool: Literal["fr_trace", "analysis_flight"]
    findings: tuple[FrTraceFinding, ...] = ()
    verdicts: tuple[FlightVerdict, ...] = ()
    world_size: int | None = None
    errors: tuple[str, ...] = ()  # analysis_flight ERROR lines (unreadable dump, no data)
    unparsed: tuple[str, ...] = ()  # fr_trace lines outside any finding that are no known note

    @property
    def clean(self) -> bool:
        """The analyzer ran and reported nothing (fr_trace prints no block when every collective matched)."""
        return not (self.findings or self.verdicts or self.errors or self.unparsed)


class _Block:
    def __init__(self, kind: FindingKind, seq: int | None, entry: int | None) -> None:
        self.kind, self.seq, self.entry = kind, seq, entry
        self.fields: dict[str, str] = {}
        self.stack: list[str] | None = None
        self.missing_dumps: frozenset[int] | None = None

    def close(self, line_no: int) -> FrTraceFinding:
        fields = dict(self.fields)
        try:
            missing = fields.pop("missing ranks", None)
            expected = fields.pop("expected ranks", None)
            expected_set = _rank_set(expected) if expected and not expected.strip().isdigit() else None
            record_id, world_size = fields.pop("internal record id", None), fields.pop("world size", None)
            error_text = fields.pop("error msg", None)
            return FrTraceFinding(
                kind=self.kind, collective_seq=self.seq, entry_index=self.entry,
                record_id=int(record_id) if record_id is not None else None,
                group=fields.pop("group info", None), collective=fields.pop("collective", None),
                missing_ranks=self.missing_dumps if missing is None else _rank_set(missing),
                expected_ranks=expected_set,
                expected_rank_count=len(expected_set) if expected_set is not None
                else (int(expected) if expected else None),
                world_size=int(world_size) if world_size is not None else None,
                state=fields.pop("collective state", None),
                input_sizes=fields.pop("input sizes", None), output_sizes=fields.pop("output sizes", None),
                culprit_ranks=frozenset(int(m.group("rank")) for m in _CULPRIT_RE.finditer(error_text or "")),
                error_text=error_text, stack=tuple(self.stack or ()), extra=fields,
            )
        except ValueError as error:
            raise ParseError(f"fr_trace block ending before line {line_no}: {error}") from None


def _parse_fr_trace(lines: list[str]) -> FrAnalysis:
    findings: list[FrTraceFinding] = []
    unparsed: list[str] = []
    block: _Block | None = None
    for line_no, raw in enumerate(lines, start=1):
        line = raw.strip()
        if not line:
            continue
        header = next(((match, kind) for pattern, kind in _HEADERS if (match := pattern.match(line))), None)
        missing_dumps = _MISSING_DUMPS_RE.match(line)
        if header is not None or missing_dumps is not None:
            if block is not None:
                findings.append(block.close(line_no))
                block = None
            if header is not None:
                match, kind = header
                entry = match.groupdict().get("entry")
                block = _Block(kind, int(match.group("seq")), int(entry) if entry is not None else None)
            else:
                assert missing_dumps is not None
                gone = _Block("missing_dumps", None, None)
                gone.missing_dumps = _rank_set("{" + missing_dumps.group("ranks").strip("{}[] ") + "}")
                findings.append(gone.close(line_no))
            continue
        if block is not None and block.stack is not None:
            if _FRAME_RE.match(line):
                block.stack.append(line)
                continue
            findings.append(block.close(line_no))  # the stack ended; whatever this is, it is outside the block
            block = None
        if block is None:
            if not any(note.match(line) for note in _NOTES):
                unparsed.append(line)
            continue
        field_match = _FIELD_RE.match(line)
        if field_match is None:
            raise ParseError("expected 'key: value' inside an fr_trace block", line_no, raw)
        if field_match.group("key") == _STACK_KEY:
            block.stack = [field_match.group("value").strip()] if field_match.group("value").strip() else []
        else:
            block.fields[field_match.group("key")] = field_match.group("value").strip()
    if block is not None:
        findings.append(block.close(len(lines)))
    if unparsed and not findings:
        raise ParseError(f"neither fr_trace findings nor analysis_flight.py log lines: {unparsed[0]!r}")
    return FrAnalysis(tool="fr_trace", findings=tuple(findings), unparsed=tuple(unparsed))


def _parse_analysis_flight(lines: list[str]) -> FrAnalysis:
    verdicts: list[FlightVerdict] = []
    errors: list[str] = []
    world_size: int | None = None
    for line_no, raw in enumerate(lines, start=1):
        log = _LOG_RE.match(raw.strip())
        if log is None:
            if raw.strip():
                raise ParseError("not an analysis_flight.py log line", line_no, raw)
            continue
        message = log.group("message").strip()
        if log.group("level") == "ERROR":
            errors.append(message)
            continue
        if message.startswith("World Size:"):
            world_size = int(message.split(":", 1)[1].strip().strip("'\""))
            continue
        for pattern, kind in _VERDICTS:
            match = pattern.match(message)
            if match is not None:
                found = match.groupdict()
                verdicts.append(FlightVerdict(kind=kind, pg_id=found.get("pg"), operator=found.get("op"),
                                              rank=int(found["rank"]) if found.get("rank") else None,
                                              sentence=message))
                break
    return FrAnalysis(tool="analysis_flight", verdicts=tuple(verdicts), world_size=world_size, errors=tuple(errors))


def _without_python_warnings(lines: list[str]) -> list[str]:
    kept: list[str] = []
    after_warning = False
    for line in lines:
        if _PYTHON_WARNING_RE.match(line):
            after_warning = True
            continue
        if after_warning and line[:1].isspace() and line.strip():
            after_warning = False
            continue
        after_warning = False
        kept.append(line)
    return kept


def parse(text: str) -> FrAnalysis:
    """fr_trace / torchfrtrace output, or analysis_flight.py's log, told apart by the log-line prefix.

    Python warnings printed by the analyzer's interpreter (stderr captured with stdout) are dropped.
    """
    lines = _without_python_warnings(text.splitlines())
    first = next((line for line in lines if line.strip()), "")
    if _LOG_RE.match(first.strip()):
        return _parse_analysis_flight(lines)
    return _parse_fr_trace(lines)
