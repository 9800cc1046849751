"""Reading triage inputs: ``npuwatch bundle`` archives and plain directories, into ``Evidence``.

Every file and member is taken in by the one intake ``scan-logs`` uses too (``agent.health.log_files``):
its walk, symlink policy, gzip by content, byte limits (``Limits.member_bytes`` a file,
``Limits.input_bytes`` an input, decompressed: a gzip bomb stops there) and binary test; what it could
not read or cut is a problem of the input.

**Bundles** (``.tar.gz``, ``.tgz``, ``.tar``) are read as a stream (``tarfile`` ``r|*``): nothing
is extracted to disk. Only regular files are read; a member with an absolute name, a ``..``
part, or that is a link or device is refused and reported. Where a member belongs comes from its path
in the bundle (``logs/``, ``fr/``, ``tools/``, ``etc/hccn.conf``, ``ranktable/``, ``metrics.prom``,
``manifest.json``, ``config.json``: the node's config, whose limits its saved readings are judged with,
``agent.triage.node_config``); the manifest names the node (until it is read, the bundle's file name does).

**Directories**: the directory's name is the node's unless a ``manifest.json`` at its top (an unpacked
bundle) says otherwise; bundles found inside are inputs of their own. Each file is told apart by its
content: a flight-recorder dump (pickle or JSON with ``pg_config``), a rank table (JSON with
``server_list``), a saved hccn_tool / npu-smi output (``snapshots.recognise``), ``hccn.conf``, a metrics
exposition, else a log (plain or gzip). Binary files are skipped, and are not files read.

``read_inputs`` reads several inputs in a pool of worker processes (one input per task) and
merges their evidence.
"""

from __future__ import annotations

import json
import os
import tarfile
import zlib
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path, PurePosixPath
from typing import Any

from agent.health.log_files import HEAD_BYTES, Content, Intake, Limits, is_binary
from agent.triage.evidence import Address, Evidence, FlightEntry, FlightRecord
from agent.triage.logs import LogReader, read_stream
from agent.triage.node_config import CONFIG_MEMBER, NodeLimits
from agent.triage.series import faults_from_samples, parse_exposition
from agent.triage.snapshots import ToolReadings, device_from_name, rank_table_addresses, recognise
from collectors.base import ParseError
from collectors.flight_recorder import RankDump, parse_dump, rank_from_filename
from collectors.hccl import ranktable as hccl_ranktable

__all__ = ["BUNDLE_SUFFIXES", "Limits", "expand_inputs", "read_input", "read_inputs", "read_rank_table"]

BUNDLE_SUFFIXES = (".tar.gz", ".tgz", ".tar")
FLIGHT_ENTRIES_KEPT = 16  # per process group and rank: the newest collectives


def expand_inputs(paths: Sequence[str]) -> tuple[list[str], list[str]]:
    """(inputs, problems): bundles found inside directories become inputs of their own."""
    inputs: list[str] = []
    problems: list[str] = []
    for raw in paths:
        path = Path(raw)
        if not path.exists():
            problems.append(f"{raw}: no such file or directory")
            continue
        inputs.append(raw)
        if path.is_dir():
            inputs.extend(str(bundle) for bundle in _bundles_under(path))
    return inputs, problems


def _bundles_under(root: Path) -> Iterator[Path]:
    # The intake's walk; its problems are said when the directory itself is read.
    for path in Intake(Limits(), lambda problem: None).paths_under(str(root)):
        if path.endswith(BUNDLE_SUFFIXES) and not os.path.islink(path):
            yield Path(path)


def read_rank_table(path: str) -> tuple[list[Address], list[str]]:
    try:
        table = hccl_ranktable.load(Path(path))
    except (OSError, ParseError) as exc:
        return [], [f"{path}: rank table unreadable: {exc}"]
    return rank_table_addresses(table), []


# ----------------------------------------------------------------------------- one input


class _Input:
    """The state of reading one input (one node)."""

    def __init__(self, source: str, node: str, limits: Limits) -> None:
        self.source = source
        self.node = node
        self.limits = limits
        self.evidence = Evidence()
        self.coverage = self.evidence.coverage(node)
        self.coverage.inputs.append(source)
        self.tools = ToolReadings(node)
        self.chips: dict[str, int] = {}  # "npu-chip" -> device id, from a bundle's tools/chips.json
        self.manifest: dict[str, Any] | None = None
        self.intake = Intake(limits, self.problem)

    def problem(self, text: str) -> None:
        self.coverage.problems.append(text)
        self.evidence.problems.append(f"{self.node}: {text}")

    def budget(self) -> int:
        return self.intake.budget()

    # -- what a file is

    def consume(self, name: str, content: Content, mtime: float | None, role: str | None) -> None:
        """Read one file's content (``role`` from its place in a bundle, None: tell by content)."""
        kind = "log" if content.gzipped else role or self._sniff(name, content.head)  # gzip: a rotated log
        if content.binary and kind in ("log", "skip"):
            return  # binary (a core dump among the logs, or the gzip of one): skipped, not a file read
        if kind == "log":
            self._log(name, content, mtime)
        else:
            self._other(kind, name, content, mtime)
        if content.error is None:  # a file that broke off (corrupt gzip) is a problem, not a file read
            self.coverage.files += 1

    def _other(self, kind: str, name: str, content: Content, mtime: float | None) -> None:
        if kind == "skip":
            return
        body = content.read(self.limits.small_bytes + 1)
        if len(body) > self.limits.small_bytes:
            self.problem(f"{name}: {kind} over {self.limits.small_bytes} bytes, not read")
            return
        try:
            self._small(kind, name, body, mtime)
        except (ParseError, ValueError, UnicodeDecodeError, RecursionError) as exc:
            self.problem(f"{name}: unreadable {kind}: {exc}")

    def _sniff(self, name: str, head: bytes) -> str:
        base = PurePosixPath(name).name
        if head.startswith(b"\x80"):
            return "flight"
        stripped = head.lstrip()
        if stripped.startswith(b"{"):
            if b'"pg_config"' in head or b'"pg_status"' in head or b'"entries"' in head:
                return "flight"
            if b'"server_list"' in head or b'"rank_list"' in head:
                return "ranktable"
            if base == "manifest.json" and b'"npuwatch_version"' in head:
                return "manifest"
            if base == CONFIG_MEMBER and b'"npuwatch_config"' in head:
                return "node_config"
            return "skip"
        if is_binary(head):
            return "skip"
        if b"# TYPE " in head[:4096] and (b"npu_" in head or b"npuwatch_" in head):
            return "metrics"
        text = head.decode("utf-8", "replace")
        command = recognise(text)
        if command is not None and len(head) < HEAD_BYTES:
            return f"tool:{command}"
        return "log"

    def _small(self, kind: str, name: str, body: bytes, mtime: float | None) -> None:
        if kind == "flight":
            self._flight(name, body)
        elif kind == "ranktable":
            self.evidence.addresses.extend(rank_table_addresses(hccl_ranktable.parse(body)))
        elif kind == "manifest":
            self._manifest(body)
        elif kind == "metrics":
            samples = parse_exposition(body.decode("utf-8", "replace"))
            self.evidence.faults.extend(faults_from_samples(self.node, samples, mtime))
        elif kind == "node_config":
            self.tools.limits = NodeLimits.from_document(body)
        elif kind == "chips":
            for row in json.loads(body):
                self.chips[f"{row['npu']}-{row['chip']}"] = int(row["device"])
        elif kind.startswith("tool:"):
            self._tool(kind[len("tool:"):], name, body.decode("utf-8", "replace"), mtime)
        elif kind == "hccn_conf":
            self.tools.add("hccn_conf", None, body.decode("utf-8", "replace"), mtime)

    def _tool(self, command: str, name: str, text: str, mtime: float | None) -> None:
        path = PurePosixPath(name)
        parent = path.parent.name  # a bundle keeps tools/hccn_tool/<device>/ and tools/npu-smi/<npu>-<chip>/
        device: int | None
        if command in ("hccn_conf", "info"):
            device = None
        elif command in ("health", "ecc", "hccs") and parent in self.chips:
            device = self.chips[parent]
        elif parent.isdigit():
            device = int(parent)
        else:
            device = device_from_name(path.name, text)
            if device is None:
                device = device_from_name(parent)
        self.tools.add(command, device, text, mtime)

    def _flight(self, name: str, body: bytes) -> None:
        rank = rank_from_filename(PurePosixPath(name).name)
        dump = parse_dump(body, rank)
        if dump.rank is None:
            self.problem(f"{name}: flight-recorder dump without a rank in its name")
            return
        self.evidence.flights.extend(flight_records(self.node, dump, f"{self.source}:{name}"))

    def _manifest(self, body: bytes) -> None:
        manifest = json.loads(body)
        if not isinstance(manifest, dict):
            raise ValueError("manifest is not an object")
        self.manifest = manifest

    def _log(self, name: str, content: Content, mtime: float | None) -> None:
        reader = LogReader(self.node, f"{self.node}:{name}", mtime)
        read_stream(content.read, reader)
        self._logged(reader)

    def _logged(self, reader: LogReader) -> None:
        self.evidence.extend(reader.finish())
        self.coverage.saw(reader.first_at)
        self.coverage.saw(reader.last_at)

    # -- the end

    def finish(self) -> Evidence:
        faults, addresses = self.tools.judge()
        self.evidence.faults.extend(faults)
        self.evidence.addresses.extend(addresses)
        self.coverage.bytes = self.intake.read_bytes
        manifest = self.manifest
        if manifest is not None:
            node = str(manifest.get("node") or self.node)
            for ip in manifest.get("addresses", []):
                self.evidence.addresses.append(Address(str(ip), node, None, source=f"bundle manifest of {node}"))
            created = manifest.get("created")
            if isinstance(created, (int, float)):
                self.coverage.taken_at = float(created)
            for problem in manifest.get("failed", []):
                self.coverage.problems.append(f"bundle: {problem}")
            self.evidence.relabel(self.node, node)
            self.node = node
        return self.evidence


def flight_records(node: str, dump: RankDump, source: str) -> list[FlightRecord]:
    """One record per process group of a rank's dump, with its newest collectives."""
    assert dump.rank is not None
    names: dict[int, tuple[str, str]] = {}
    for entry in dump.entries:
        if entry.pg_id is not None:
            names.setdefault(entry.pg_id, entry.process_group)
    configs = list(dump.pg_config.values())
    records = []
    for pg_id, progress in dump.progress.items():
        name, desc = names.get(pg_id, (str(pg_id), ""))
        config = dump.pg_config.get(name) or (configs[0] if len(configs) == 1 else None)
        entries = [e for e in dump.entries if e.pg_id == pg_id][-FLIGHT_ENTRIES_KEPT:]
        if not entries and progress.last_enqueued_seq is None:
            continue  # a group that never ran a collective
        kept = tuple(FlightEntry(e.collective_seq_id, e.collective, e.state,
                                 e.time_created_ns / 1e9 if e.time_created_ns else None,
                                 f"{list(map(list, e.input_sizes))} {'/'.join(e.input_dtypes)}", e.is_p2p)
                     for e in entries)
        records.append(FlightRecord(node, dump.rank, name, desc or (config.desc if config else ""),
                                    config.ranks if config is not None else None, progress.last_enqueued_seq,
                                    progress.last_completed_seq, kept, source))
    return records


_BUNDLE_ROLES = (("manifest.json", "manifest"), ("metrics.prom", "metrics"), ("etc/hccn.conf", "hccn_conf"),
                 ("tools/chips.json", "chips"), (CONFIG_MEMBER, "node_config"))


def _bundle_role(name: str) -> str | None:
    """A member's role from its path below the bundle's top directory; None: tell by content."""
    parts = PurePosixPath(name).parts
    inner = "/".join(parts[1:]) if len(parts) > 1 else name
    for path, role in _BUNDLE_ROLES:
        if inner == path:
            return role
    if inner.startswith("logs/"):
        return "log"
    if inner.startswith("fr/"):
        return "flight"
    if inner.startswith("ranktable/"):
        return "ranktable"
    if inner in ("versions.txt",) or inner.startswith("cmd/"):
        return "skip"
    return None


def _unsafe(member: tarfile.TarInfo) -> str | None:
    name = member.name
    parts = PurePosixPath(name).parts
    if name.startswith(("/", "\\")) or ".." in parts or (parts and ":" in parts[0]):
        return f"{name!r}: unsafe member name refused"
    if member.issym() or member.islnk():
        return f"{name!r}: link refused"
    if not (member.isreg() or member.isdir()):
        return f"{name!r}: not a regular file, refused"
    return None


def _read_bundle(path: Path, limits: Limits) -> Evidence:
    node = path.name
    for suffix in BUNDLE_SUFFIXES:
        if node.endswith(suffix):
            node = node[: -len(suffix)]
            break
    state = _Input(str(path), node, limits)
    members = 0
    try:
        with tarfile.open(path, mode="r|*") as tar:
            for member in tar:
                members += 1
                if members > limits.members:
                    state.problem(f"more than {limits.members} members; the rest not read")
                    break
                refused = _unsafe(member)
                if refused is not None:
                    state.problem(refused)
                    continue
                if not member.isreg():
                    continue
                stream = tar.extractfile(member)
                if stream is None:
                    continue
                with stream, state.intake.content(member.name, stream, member.size) as content:
                    if content is not None:
                        state.consume(member.name, content, float(member.mtime), _bundle_role(member.name))
                if state.budget() <= 0:
                    state.problem(f"stopped after {limits.input_bytes} bytes")
                    break
    except (tarfile.TarError, OSError, EOFError, zlib.error) as exc:
        state.problem(f"{path}: unreadable bundle: {exc}")
        if members == 0:
            evidence = Evidence(problems=[f"{path}: unreadable bundle: {exc}"])
            return evidence
    return state.finish()


def _read_directory(path: Path, limits: Limits) -> Evidence:
    node = path.resolve().name or str(path)
    state = _Input(str(path), node, limits)
    for file in state.intake.walk(str(path), skip=lambda name: name.endswith(BUNDLE_SUFFIXES)):  # inputs of their own
        state.consume(file.name, file.content, file.mtime, "manifest" if file.name == "manifest.json" else None)
    return state.finish()


def read_input(path: str, limits: Limits | None = None) -> Evidence:
    """Everything one input holds, as evidence; never raises for unreadable content."""
    limits = limits or Limits()
    target = Path(path)
    if target.is_dir():
        return _read_directory(target, limits)
    if target.name.endswith(BUNDLE_SUFFIXES):
        return _read_bundle(target, limits)
    state = _Input(path, target.resolve().parent.name or path, limits)
    if not target.exists():
        return Evidence(problems=[f"{path}: no such file or directory"])
    for file in state.intake.open(path, target.name):
        state.consume(file.name, file.content, file.mtime, None)
    return state.finish()


def read_inputs(paths: Sequence[str], *, jobs: int = 1, limits: Limits | None = None,
                progress: Callable[[str, Evidence], None] | None = None) -> Evidence:
    """Read every input (in ``jobs`` worker processes when more than one) and merge the evidence."""
    merged = Evidence()
    inputs, problems = expand_inputs(paths)
    merged.problems.extend(problems)
    if jobs <= 1 or len(inputs) <= 1:
        for path in inputs:
            evidence = read_input(path, limits)
            if progress is not None:
                progress(path, evidence)
            merged.extend(evidence)
        return merged
    with ProcessPoolExecutor(max_workers=min(jobs, len(inputs))) as pool:
        futures = [pool.submit(read_input, path, limits) for path in inputs]
        for index, future in enumerate(futures):
            path = inputs[index]
            evidence = future.result()
            if progress is not None:
                progress(path, evidence)
            merged.extend(evidence)
    return merged

