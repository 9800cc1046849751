"""Flight-recorder dumps (PyTorch c10d and torch_npu): one file per rank with its recent collectives.

Top level: ``version``, ``pg_config`` ({group name: {name, desc, ranks: "[0, 1]"}}), ``pg_status``
({pg id: {last_enqueued_collective, last_started_collective, last_completed_collective}}) and ``entries``
(absent when collectives were excluded, or empty in torch_npu's JSON). Each entry::

    {"record_id": 4, "pg_id": 0, "process_group": ("0", "default_pg"), "collective_seq_id": 5,
     "p2p_seq_id": 0, "op_id": 5, "profiling_name": "gloo:all_reduce", "state": "scheduled",
     "input_sizes": [[3, 4]], "input_dtypes": ["Float"], "output_sizes": [[3, 4]], "output_dtypes": ["Float"],
     "time_created_ns": ..., "time_discovered_started_ns": None, "time_discovered_completed_ns": None,
     "retired": True, "timeout_ms": 3000, "is_p2p": False, "frames": [{"name", "filename", "line"}, ...]}

Format differences handled here:

- pickle (``_dump_fr_trace``, torch_npu ``_dump_hccl_trace``): ints, ``None`` for "not yet", tuples
  for ``process_group`` and (torch_npu) sizes, ``frames`` present.
- JSON (``_dump_fr_trace_json``, ``_dump_hccl_trace_json``): ``pg_status`` values are strings, a missing
  time is ``0`` (read here as None), ``process_group`` is a list, no ``frames``.
- torch_npu (version "2.4"): ``profiling_name`` is ``""`` (profiling unsupported), so ``collective``
  falls back to the first frame's function name, as Ascend's analysis_flight.py does; pg_config is keyed
  ``group_name_0`` and ``process_group`` is ``("group_name_0", "")``; ``timeout_ms`` includes
  HCCL_EXEC_TIMEOUT (3636000 by default).
- gloo in torch 2.13 (version "2.10", seen in real dumps): every entry stays ``scheduled`` and
  ``retired`` whether it finished or timed out, ``last_started_collective`` is -1, and
  ``last_completed_collective`` races the dump (it has lagged a collective that had returned and has
  counted one that timed out); ``pg_config`` holds the default group under the empty name ``""``.
  Compare ranks by ``last_enqueued_seq`` and by the entries.

The rank is not in the file: torch names dumps ``<prefix><rank>`` (``nccl_trace_rank_3``, torch_npu's
``/tmp/3``); ``rank_from_filename`` reads it back.

Safety: never ``pickle.load`` a dump someone else wrote. ``parse_dump`` reads JSON with ``json`` and
pickles through an unpickler that resolves no global at all, after an opcode scan that admits only
the opcodes building dicts, lists, tuples, str, bytes, int, float, bool and None. Input over
``MAX_DUMP_BYTES`` and nesting deeper than ``MAX_NESTING`` are refused.
"""

from __future__ import annotations

import io
import json
import pickle
import pickletools
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, NoReturn

from collectors.base import ParseError

__all__ = [
    "MAX_DUMP_BYTES",
    "MAX_NESTING",
    "FrEntry",
    "FrFrame",
    "PgConfig",
    "PgProgress",
    "RankDump",
    "load_dump",
    "parse_dump",
    "parse_dump_object",
    "rank_from_filename",
    "safe_unpickle",
]

MAX_DUMP_BYTES = 64 * 1024 * 1024
MAX_NESTING = 32

# Opcodes that only build plain containers and scalars, or manage the memo and the stack. Anything
# else (GLOBAL, STACK_GLOBAL, REDUCE, BUILD, INST, OBJ, NEWOBJ*, EXT*, PERSID, sets, buffers) is refused.
_ADMITTED_OPCODES = frozenset({
    "PROTO", "FRAME", "STOP", "MARK", "POP", "POP_MARK", "DUP",
    "PUT", "BINPUT", "LONG_BINPUT", "MEMOIZE", "GET", "BINGET", "LONG_BINGET",
    "NONE", "NEWTRUE", "NEWFALSE",
    "INT", "BININT", "BININT1", "BININT2", "LONG", "LONG1", "LONG4", "FLOAT", "BINFLOAT",
    "UNICODE", "SHORT_BINUNICODE", "BINUNICODE", "BINUNICODE8",
    "SHORT_BINBYTES", "BINBYTES", "BINBYTES8",
    "EMPTY_DICT", "DICT", "SETITEM", "SETITEMS",
    "EMPTY_LIST", "LIST", "APPEND", "APPENDS",
    "EMPTY_TUPLE", "TUPLE", "TUPLE1", "TUPLE2", "TUPLE3",
})
_CONTAINERS = (dict, list, tuple)
_SCALARS = (str, bytes, int, float, bool, type(None))
_RANK_SUFFIX_RE = re.compile(r"(\d+)(?:\.(?:json|pkl|pickle))?$")
_RANKS_TEXT_RE = re.compile(r"^\[\s*(?:\d+\s*(?:,\s*\d+\s*)*)?\]$")


class _NoGlobalsUnpickler(pickle.Unpickler):
    """Resolves no class or function: a dump is plain data, so any global means a crafted file."""

    def find_class(self, module: str, name: str) -> NoReturn:
        raise pickle.UnpicklingError(f"global {module}.{name} refused")

    def persistent_load(self, pid: object) -> NoReturn:
        raise pickle.UnpicklingError("persistent id refused")


def _check_opcodes(data: bytes) -> None:
    try:
        for opcode, _arg, position in pickletools.genops(data):
            if opcode.name not in _ADMITTED_OPCODES:
                raise ParseError(f"pickle opcode {opcode.name} at byte {position} is not allowed in a dump")
    except ParseError:
        raise
    except Exception as error:  # genops raises ValueError and others on malformed input
        raise ParseError(f"malformed pickle: {error}") from None


def _children(node: object) -> list[object]:
    if isinstance(node, dict):
        return [*node.keys(), *node.values()]
    return list(node) if isinstance(node, (list, tuple)) else []


def _check_plain(root: object, max_depth: int) -> None:
    """Only admitted types, no reference cycle, container nesting at most ``max_depth``.

    Iterative depth-first walk; a container shared by several parents (torch's pickler shares the
    frame dicts between entries) is measured once.
    """
    height: dict[int, int] = {}  # id -> container levels at and below it, once measured
    on_path: set[int] = set()
    stack: list[tuple[object, bool]] = [(root, False)]
    while stack:
        node, finished = stack.pop()
        if type(node) in _SCALARS:
            continue
        if type(node) not in _CONTAINERS:
            raise ParseError(f"dump holds a {type(node).__name__}, not plain data")
        key = id(node)
        if finished:
            on_path.discard(key)
            below = [height.get(id(child), 0) for child in _children(node) if type(child) in _CONTAINERS]
            height[key] = 1 + max(below, default=0)
            if height[key] > max_depth:
                raise ParseError(f"dump nests deeper than {max_depth} levels")
            continue
        if key in on_path:
            raise ParseError("dump contains a reference cycle")
        if key in height:
            continue
        on_path.add(key)
        stack.append((node, True))
        stack.extend((child, False) for child in _children(node))


def safe_unpickle(data: bytes, max_depth: int = MAX_NESTING) -> object:
    """Decode a pickle of plain data without resolving any global; ``ParseError`` on anything else."""
    _check_opcodes(data)
    try:
        value = _NoGlobalsUnpickler(io.BytesIO(data)).load()
    except Exception as error:  # UnpicklingError, EOFError, MemoryError on truncated or crafted input
        raise ParseError(f"unreadable pickle: {error}") from None
    _check_plain(value, max_depth)
    return value


@dataclass(frozen=True)
class FrFrame:
    name: str
    filename: str
    line: int | None


@dataclass(frozen=True)
class FrEntry:
    record_id: int
    pg_id: int | None
    process_group: tuple[str, str]  # (name, desc)
    collective_seq_id: int
    p2p_seq_id: int
    op_id: int
    profiling_name: str
    state: str  # scheduled / started / completed; kept raw if a newer torch adds one
    is_p2p: bool
    retired: bool | None = None
    input_sizes: tuple[tuple[int, ...], ...] = ()
    output_sizes: tuple[tuple[int, ...], ...] = ()
    input_dtypes: tuple[str, ...] = ()
    output_dtypes: tuple[str, ...] = ()
    time_created_ns: int | None = None
    time_discovered_started_ns: int | None = None
    time_discovered_completed_ns: int | None = None
    timeout_ms: int | None = None
    duration_ms: float | None = None
    frames: tuple[FrFrame, ...] = ()

    @property
    def collective(self) -> str | None:
        """``all_reduce`` from ``nccl:all_reduce``; on torch_npu (empty name) the first frame's function."""
        if self.profiling_name:
            return self.profiling_name.split(":", 1)[-1]
        return self.frames[0].name if self.frames else None


@dataclass(frozen=True)
class PgConfig:
    key: str
    name: str
    desc: str
    ranks: tuple[int, ...] | None  # None when the dump's "ranks" text is not a plain list


@dataclass(frozen=True)
class PgProgress:
    """Last collective sequence numbers of one process group on one rank (None: none yet / unknown)."""

    pg_id: int
    last_enqueued_seq: int | None
    last_started_seq: int | None
    last_completed_seq: int | None
    source: Literal["pg_status", "entries"]


@dataclass(frozen=True)
class RankDump:
    rank: int | None
    version: str
    pg_config: dict[str, PgConfig] = field(default_factory=dict)
    pg_status: dict[int, PgProgress] = field(default_factory=dict)
    entries: tuple[FrEntry, ...] = ()

    def progress_from_entries(self) -> dict[int, PgProgress]:
        """Per process group, the newest collective seq ids seen in the (ring-buffered) entries."""
        seqs: dict[int, dict[str, int]] = {}
        for entry in self.entries:
            if entry.is_p2p or entry.pg_id is None:
                continue
            last = seqs.setdefault(entry.pg_id, {})
            states = {"enqueued": True, "started": entry.state in ("started", "completed"),
                      "completed": entry.state == "completed"}
            for what, reached in states.items():
                if reached:
                    last[what] = max(last.get(what, entry.collective_seq_id), entry.collective_seq_id)
        return {pg_id: PgProgress(pg_id, last.get("enqueued"), last.get("started"), last.get("completed"), "entries")
                for pg_id, last in sorted(seqs.items())}

    @property
    def progress(self) -> dict[int, PgProgress]:
        """The dump's own ``pg_status`` counters where present (they survive the ring buffer's wrap),
        else what the entries show."""
        merged = self.progress_from_entries()
        merged.update(self.pg_status)
        return dict(sorted(merged.items()))

    def collectives_at(self, pg_id: int, seq: int) -> tuple[FrEntry, ...]:
        """The non-p2p entries with this collective sequence number (several when coalesced)."""
        return tuple(e for e in self.entries if e.pg_id == pg_id and not e.is_p2p and e.collective_seq_id == seq)


# --- field readers ---------------------------------------------------------------------------------------


def _fail(where: str, message: str) -> NoReturn:
    raise ParseError(f"{where}: {message}")


def _int(value: object, where: str) -> int:
    if isinstance(value, bool):
        _fail(where, f"{value!r} is not an integer")
    if isinstance(value, int):
        return value
    if isinstance(value, str) and re.fullmatch(r"-?\d+", value.strip()):
        return int(value)
    _fail(where, f"{value!r} is not an integer")


def _optional_int(value: object, where: str) -> int | None:
    return None if value is None else _int(value, where)


def _time_ns(value: object, where: str) -> int | None:
    # JSON dumps write 0 for "not discovered yet"; pickles write None.
    stamp = _optional_int(value, where)
    return None if stamp is None or stamp <= 0 else stamp


def _seq(value: object, where: str) -> int | None:
    # pg_status starts at -1 ("nothing yet"); the JSON dump writes the same as a string.
    number = _int(value, where)
    return None if number < 0 else number


def _str(value: object, where: str) -> str:
    if not isinstance(value, str):
        _fail(where, f"expected a string, got {value!r}")
    return value


def _bool(value: object, where: str) -> bool:
    if not isinstance(value, bool):
        _fail(where, f"expected true/false, got {value!r}")
    return value


def _mapping(value: object, where: str) -> Mapping[Any, Any]:
    if not isinstance(value, dict):
        _fail(where, "expected a mapping")
    return value


def _sequence(value: object, where: str) -> Sequence[Any]:
    if not isinstance(value, (list, tuple)):
        _fail(where, "expected a list")
    return value


def _sizes(value: object, where: str) -> tuple[tuple[int, ...], ...]:
    return tuple(tuple(_int(dim, f"{where}[{i}]") for dim in _sequence(shape, f"{where}[{i}]"))
                 for i, shape in enumerate(_sequence(value, where)))


def _strings(value: object, where: str) -> tuple[str, ...]:
    return tuple(_str(item, f"{where}[{i}]") for i, item in enumerate(_sequence(value, where)))


def _required(obj: Mapping[Any, Any], key: str, where: str) -> Any:
    if key not in obj:
        _fail(where, f"missing {key!r}")
    return obj[key]


def _frames(value: object, where: str) -> tuple[FrFrame, ...]:
    frames = []
    for i, raw in enumerate(_sequence(value, where)):
        frame = _mapping(raw, f"{where}[{i}]")
        frames.append(FrFrame(name=_str(frame.get("name", ""), f"{where}[{i}].name"),
                              filename=_str(frame.get("filename", ""), f"{where}[{i}].filename"),
                              line=_optional_int(frame.get("line"), f"{where}[{i}].line")))
    return tuple(frames)


def _entry(raw: object, where: str) -> FrEntry:
    obj = _mapping(raw, where)
    group = _sequence(_required(obj, "process_group", where), f"{where}.process_group")
    if len(group) != 2:
        _fail(f"{where}.process_group", f"expected (name, desc), got {group!r}")
    state = _str(_required(obj, "state", where), f"{where}.state")
    duration = obj.get("duration_ms")
    if duration is not None and (isinstance(duration, bool) or not isinstance(duration, (int, float))):
        _fail(f"{where}.duration_ms", f"{duration!r} is not a number")
    return FrEntry(
        record_id=_int(_required(obj, "record_id", where), f"{where}.record_id"),
        pg_id=_optional_int(obj.get("pg_id"), f"{where}.pg_id"),
        process_group=(_str(group[0], f"{where}.process_group[0]"), _str(group[1], f"{where}.process_group[1]")),
        collective_seq_id=_int(_required(obj, "collective_seq_id", where), f"{where}.collective_seq_id"),
        p2p_seq_id=_int(obj.get("p2p_seq_id", 0), f"{where}.p2p_seq_id"),
        op_id=_int(_required(obj, "op_id", where), f"{where}.op_id"),
        profiling_name=_str(_required(obj, "profiling_name", where), f"{where}.profiling_name"),
        state=state,
        is_p2p=_bool(obj.get("is_p2p", False), f"{where}.is_p2p"),
        retired=None if obj.get("retired") is None else _bool(obj["retired"], f"{where}.retired"),
        input_sizes=_sizes(obj.get("input_sizes", ()), f"{where}.input_sizes"),
        output_sizes=_sizes(obj.get("output_sizes", ()), f"{where}.output_sizes"),
        input_dtypes=_strings(obj.get("input_dtypes", ()), f"{where}.input_dtypes"),
        output_dtypes=_strings(obj.get("output_dtypes", ()), f"{where}.output_dtypes"),
        time_created_ns=_time_ns(obj.get("time_created_ns"), f"{where}.time_created_ns"),
        time_discovered_started_ns=_time_ns(obj.get("time_discovered_started_ns"),
                                            f"{where}.time_discovered_started_ns"),
        time_discovered_completed_ns=_time_ns(obj.get("time_discovered_completed_ns"),
                                              f"{where}.time_discovered_completed_ns"),
        timeout_ms=_optional_int(obj.get("timeout_ms"), f"{where}.timeout_ms"),
        duration_ms=None if duration is None else float(duration),
        frames=_frames(obj.get("frames", ()), f"{where}.frames"),
    )


def _ranks(value: object) -> tuple[int, ...] | None:
    if isinstance(value, str) and _RANKS_TEXT_RE.match(value.strip()):
        return tuple(int(rank) for rank in re.findall(r"\d+", value))
    if isinstance(value, (list, tuple)) and all(isinstance(r, int) and not isinstance(r, bool) for r in value):
        return tuple(value)
    return None


def _pg_config(value: object) -> dict[str, PgConfig]:
    configs = {}
    for key, raw in _mapping(value, "pg_config").items():
        where = f"pg_config[{key!r}]"
        obj = _mapping(raw, where)
        configs[str(key)] = PgConfig(key=str(key), name=_str(obj.get("name", ""), f"{where}.name"),
                                     desc=_str(obj.get("desc", ""), f"{where}.desc"), ranks=_ranks(obj.get("ranks")))
    return configs


def _pg_status(value: object) -> dict[int, PgProgress]:
    statuses = {}
    for key, raw in _mapping(value, "pg_status").items():
        where = f"pg_status[{key!r}]"
        pg_id = _int(key, where)
        obj = _mapping(raw, where)
        statuses[pg_id] = PgProgress(
            pg_id=pg_id,
            last_enqueued_seq=_seq(_required(obj, "last_enqueued_collective", where), where),
            last_started_seq=_seq(_required(obj, "last_started_collective", where), where),
            last_completed_seq=_seq(_required(obj, "last_completed_collective", where), where),
            source="pg_status",
        )
    return dict(sorted(statuses.items()))


def parse_dump_object(document: object, rank: int | None = None) -> RankDump:
    """A dump already decoded to plain Python data (e.g. by ``safe_unpickle``)."""
    top = _mapping(document, "dump")
    version = _required(top, "version", "dump")
    entries = _sequence(top.get("entries", []), "entries")
    return RankDump(
        rank=rank,
        version=_str(version, "version"),
        pg_config=_pg_config(top.get("pg_config", {})),
        pg_status=_pg_status(top.get("pg_status", {})),
        entries=tuple(_entry(raw, f"entries[{i}]") for i, raw in enumerate(entries)),
    )


def parse_dump(data: bytes, rank: int | None = None, max_bytes: int = MAX_DUMP_BYTES) -> RankDump:
    """A dump file's bytes, JSON or pickle (told apart by the first byte)."""
    if len(data) > max_bytes:
        raise ParseError(f"dump is {len(data)} bytes, over the {max_bytes}-byte limit")
    head = data.lstrip()[:1]
    if head == b"{":
        try:
            document = json.loads(data)
        except (ValueError, RecursionError) as error:
            raise ParseError(f"dump is not valid JSON: {error}") from None
        _check_plain(document, MAX_NESTING)
    elif data[:1] == b"\x80":
        document = safe_unpickle(data)
    else:
        raise ParseError("dump is neither JSON nor a pickle (protocol 2+)")
    return parse_dump_object(document, rank)


def rank_from_filename(name: str) -> int | None:
    """``nccl_trace_rank_3`` / ``/tmp/3`` / ``trace_3.json`` -> 3; None without a trailing number."""
    match = _RANK_SUFFIX_RE.search(Path(name).name)
    return int(match.group(1)) if match else None


def load_dump(path: Path, rank: int | None = None, max_bytes: int = MAX_DUMP_BYTES) -> RankDump:
    """Read one rank's dump file, refusing one over ``max_bytes`` without reading it all."""
    with path.open("rb") as handle:
        data = handle.read(max_bytes + 1)
    if len(data) > max_bytes:
        raise ParseError(f"{path}: larger than the {max_bytes}-byte limit for a dump")
    return parse_dump(data, rank_from_filename(path.name) if rank is None else rank, max_bytes)
