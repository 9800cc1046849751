"""``npuwatch bundle [--since 2h] [-o FILE]``: one tar.gz with what triage needs from this node.

Members, under one top directory ``<node>-<YYYYmmdd-HHMMSS>/``:

- ``logs/<absolute path>``: CANN/HCCL logs modified within the window, found as the agent finds
  them (``collectors.hccl_logs`` paths and globs, the kernel log; ``--log-path`` adds roots), never
  through a symlink out of a root. Newest first up to ``--max-log-bytes``; a file that does not fit
  whole keeps its newest part (from a line start); the manifest lists what was cut or left out.
- ``fr/<n>/<file>``: flight-recorder dumps modified within the window, from the prefixes in
  ``TORCH_FR_DUMP_TEMP_FILE``, ``TORCH_NCCL_DEBUG_INFO_TEMP_FILE``, ``TORCH_HCCL_DEBUG_INFO_TEMP_FILE``
  (torch_npu), their defaults (``/tmp/nccl_trace_rank_``, ``/tmp/hccl_trace_rank_``) and
  ``--dump-path`` (a directory or a prefix). The training job's environment is not this command's:
  pass the job's dump prefix with ``--dump-path`` when it is not a default.
- ``tools/npu-smi/info.txt``, ``info-m.txt``, ``<npu>-<chip>/{health,ecc,hccs}.txt``,
  ``tools/hccn_tool/<device>/{link,link_stat,net_health,optical,stat,ip}.txt`` and
  ``tools/chips.json`` (npu, chip -> device id): every call a collector's Source, through
  ``agent.health.reader.open_reader`` with the configured timeout; a tool that hangs once is not called again.
  Where npu-smi cannot answer (not installed: a container with only the driver library) and DCMI
  serves the source, its records are saved instead as ``tools/dcmi/info.json``, ``info-m.json`` and
  ``<npu>-<chip>/{health,ecc,hccs}.json`` (the npu-smi parsers' records as JSON; triage reads only the text).
- ``etc/hccn.conf``, ``ranktable/<file>`` (``--rank-table`` or ``$RANK_TABLE_FILE``),
  ``metrics.prom`` (the running agent's ``/metrics``, 2 s timeout; absent is fine),
  ``versions.txt`` (npuwatch, Python, kernel, Ascend driver and toolkit version files),
  ``config.json`` (the node's effective config, secrets redacted: ``agent.triage.node_config``; triage judges
  the saved readings with its limits, as ``check`` judged them on the node);
- ``manifest.json`` last: node, host addresses, creation time, window, and what was included, cut
  and failed.

Safe while the agent runs: files are only read, each copied up to the size it had when listed (a
file that shrinks meanwhile is padded with newlines, and says so). The archive is written to a
temporary name next to the output and renamed when complete. Progress goes to stderr on a
terminal; the archive's path is printed on stdout.
"""

from __future__ import annotations

import dataclasses
import io
import json
import os
import platform
import socket
import sys
import tarfile
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, cast

import agent
from agent.health.logscan import recent_logs
from agent.health.node import PORT_READINGS, chip_list, info_parse, port_devices
from agent.health.reader import ToolReader, as_text, open_reader
from agent.health.readings import Reading
from agent.triage.node_config import CONFIG_MEMBER, config_document
from collectors import npu_smi_ecc, npu_smi_hccs, npu_smi_health, npu_smi_info, npu_smi_mapping
from collectors.base import ChipRef, ParseError, Source
from collectors.hccn_link import device_id

if TYPE_CHECKING:
    from agent.core.config import Config

__all__ = ["DUMP_ENV_VARS", "BundleOptions", "main", "write_bundle"]

DUMP_ENV_VARS = {  # variable -> its default prefix
    "TORCH_FR_DUMP_TEMP_FILE": "/tmp/nccl_trace_rank_",
    "TORCH_NCCL_DEBUG_INFO_TEMP_FILE": "/tmp/nccl_trace_rank_",
    "TORCH_HCCL_DEBUG_INFO_TEMP_FILE": "/tmp/hccl_trace_rank_",
}
MAX_DUMP_BYTES = 64 << 20
MAX_SMALL_FILE = 64 << 20
MAX_METRICS_BYTES = 16 << 20
MIN_TAIL_BYTES = 1 << 20
VERSION_FILES = ("/usr/local/Ascend/driver/version.info", "/usr/local/Ascend/ascend-toolkit/latest/version.cfg",
                 "/usr/local/Ascend/ascend-toolkit/latest/aarch64-linux/ascend_toolkit_install.info",
                 "/usr/local/Ascend/ascend-toolkit/latest/x86_64-linux/ascend_toolkit_install.info")


@dataclass
class BundleOptions:
    since_s: float = 7200.0
    output: Path | None = None
    node: str | None = None
    max_log_bytes: int = 512 << 20
    log_paths: Sequence[str] = ()
    dump_paths: Sequence[str] = ()
    rank_table: str | None = None
    environ: Mapping[str, str] = field(default_factory=lambda: dict(os.environ))
    tool_env: Mapping[str, str] | None = None  # the demo's fake tools
    metrics: bool = True


@dataclass
class _Manifest:
    node: str
    created: float
    since: float
    included: list[dict[str, Any]] = field(default_factory=list)
    cut: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)
    tools: list[dict[str, Any]] = field(default_factory=list)
    addresses: list[str] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)

    def to_json(self) -> bytes:
        body = {"npuwatch_version": agent.__version__, "node": self.node, "created": self.created,
                "window": {"since": self.since, "until": self.created}, "addresses": self.addresses,
                "env": self.env, "included": self.included, "cut": self.cut, "failed": self.failed,
                "tools": self.tools}
        return json.dumps(body, indent=2).encode()


class _Progress:
    def __init__(self, stream: IO[str]) -> None:
        self.stream = stream
        self.enabled = stream.isatty()

    def __call__(self, text: str) -> None:
        if self.enabled:
            self.stream.write(f"bundle: {text}\n")
            self.stream.flush()


class _Writer:
    """Adds members under the bundle's top directory."""

    def __init__(self, tar: tarfile.TarFile, prefix: str, created: float, manifest: _Manifest) -> None:
        self.tar = tar
        self.prefix = prefix
        self.created = created
        self.manifest = manifest

    def _info(self, name: str, size: int, mtime: float | None = None) -> tarfile.TarInfo:
        info = tarfile.TarInfo(f"{self.prefix}/{name}")
        info.size = size
        info.mtime = int(mtime if mtime is not None else self.created)
        info.mode = 0o644
        return info

    def add_bytes(self, name: str, data: bytes, source: str = "", mtime: float | None = None) -> None:
        self.tar.addfile(self._info(name, len(data), mtime), io.BytesIO(data))
        self.manifest.included.append({"file": name, "source": source or name, "bytes": len(data)})

    def add_file(self, name: str, path: str, start: int, length: int, mtime: float) -> None:
        with open(path, "rb") as handle:
            handle.seek(start)
            reader = _Exact(handle, length, skip_partial_line=start > 0)
            self.tar.addfile(self._info(name, length, mtime), cast(IO[bytes], reader))
        if reader.padded:
            self.manifest.cut.append(f"{path}: shrank while copied; padded with {reader.padded} newlines")
        self.manifest.included.append({"file": name, "source": path, "bytes": length,
                                       **({"from_byte": start} if start else {})})


class _Exact:
    """Reads exactly ``length`` bytes: a file that shrank is padded with newlines; a copy that
    starts mid-file blanks the partial first line (so the member keeps its size)."""

    def __init__(self, handle: IO[bytes], length: int, skip_partial_line: bool) -> None:
        self.handle = handle
        self.left = length
        self.padded = 0
        self.skip = skip_partial_line

    def read(self, size: int = -1) -> bytes:
        want = self.left if size < 0 else min(size, self.left)
        if want <= 0:
            return b""
        data = self.handle.read(want)
        if self.skip:
            self.skip = False
            newline = data.find(b"\n")
            cut = newline + 1 if newline >= 0 else len(data)
            data = b" " * (cut - 1) + b"\n" + data[cut:] if cut > 0 else data
        if len(data) < want:
            self.padded += want - len(data)
            data += b"\n" * (want - len(data))
        self.left -= len(data)
        return data


# ----------------------------------------------------------------------------- tools


# Each snapshot file and the collector whose Source is run for it (the file names are what triage reads).
NPU_SMI_SNAPSHOTS: tuple[tuple[str, Source], ...] = (("health", npu_smi_health.SOURCE), ("ecc", npu_smi_ecc.SOURCE),
                                                      ("hccs", npu_smi_hccs.SOURCE))
HCCN_SNAPSHOTS: tuple[tuple[str, Source], ...] = tuple((name, source) for name, (source, _) in PORT_READINGS.items())


def _snapshot_tools(config: Config, options: BundleOptions, writer: _Writer, say: Callable[[str], None]) -> None:
    with open_reader(config, options.tool_env) as tools:  # the DCMI helper, if any, ends here
        _snapshot_with(tools, config, writer, say)


def _records_json(value: Any) -> bytes:
    """The records of a DCMI reading as JSON (dataclasses as objects)."""
    def plain(item: Any) -> Any:
        if dataclasses.is_dataclass(item) and not isinstance(item, type):
            return {f.name: plain(getattr(item, f.name)) for f in dataclasses.fields(item)}
        if isinstance(item, (list, tuple)):
            return [plain(part) for part in item]
        if isinstance(item, dict):
            return {str(key): plain(part) for key, part in item.items()}
        return item

    return json.dumps(plain(value), indent=1).encode()


def _chip_tables(record: Callable[[str, Any], str | None], direct: Callable[[str, Source, ChipRef | None], Any],
                 call: Callable[[Source, ChipRef | None], Any], max_chips: int) -> tuple[Reading, Reading | None]:
    """``npu-smi info`` and ``info -m`` as readings of the agent's parsers: the tool's text (saved), else
    DCMI's records (saved as JSON). Problems of a text that was saved but cannot be parsed are the readings'
    errors."""
    info = record("tools/npu-smi/info.txt", call(npu_smi_info.SOURCE, None))
    if info is None:
        table = direct("tools/dcmi/info.json", npu_smi_info.SOURCE, None)
        if table is None:
            return Reading(error=""), None  # why is in the manifest already
        rows = direct("tools/dcmi/info-m.json", npu_smi_mapping.SOURCE, None)
        return Reading(value=table), Reading(value=rows) if rows is not None else None
    mapping_text = record("tools/npu-smi/info-m.txt", call(npu_smi_mapping.SOURCE, None))
    return (_parsed("npu-smi info", info_parse(max_chips), info),
            _parsed("npu-smi info -m", npu_smi_mapping.parse, mapping_text) if mapping_text is not None else None)


def _parsed(what: str, parse: Callable[[str], Any], text: str) -> Reading:
    try:
        return Reading(value=parse(text))
    except (ParseError, ValueError) as exc:
        return Reading(error=f"{what}: unreadable: {exc}")


def _snapshot_with(tools: ToolReader, config: Config, writer: _Writer, say: Callable[[str], None]) -> None:
    manifest = writer.manifest

    def call(source: Source, chip: ChipRef | None) -> tuple[list[str], Reading, float]:
        started = time.monotonic()
        reading = tools.read(source, chip, as_text)
        return [source.tool, *source.argv(chip)], reading, time.monotonic() - started

    def record(name: str, called: tuple[list[str], Reading, float]) -> str | None:
        argv, reading, seconds = called
        manifest.tools.append({"file": name, "argv": argv, "ok": reading.ok, "seconds": round(seconds, 3)})
        if not reading.ok:
            manifest.failed.append(str(reading.error))
            return None
        writer.add_bytes(name, str(reading.value).encode(), " ".join(argv))
        return str(reading.value)

    def direct(name: str, source: Source, chip: ChipRef | None) -> Any:
        """DCMI's records where the tool gave no text (saved as JSON beside where the text would be)."""
        started = time.monotonic()
        reading = tools.read_direct(source, chip)
        if reading is None:
            return None
        manifest.tools.append({"file": name, "argv": ["dcmi", source.name], "ok": reading.ok,
                               "seconds": round(time.monotonic() - started, 3)})
        if not reading.ok:
            manifest.failed.append(str(reading.error))
            return None
        writer.add_bytes(name, _records_json(reading.value), f"DCMI, the records of {source.name}")
        return reading.value

    table, mapping = _chip_tables(record, direct, call, tools.max_chips)
    chips = chip_list(table, mapping)
    if not table.ok and table.error:
        manifest.failed.append(table.error)
    if mapping is not None and not mapping.ok and mapping.error:
        manifest.failed.append(mapping.error)
    devices = port_devices(chips, config.collectors.hccn_tool.hccn_conf)
    writer.add_bytes("tools/chips.json", json.dumps(
        [{"npu": ref.npu, "chip": ref.chip, "device": device_id(ref)} for ref in chips]).encode(), "npu-smi info")
    calls: list[tuple[str, Source, ChipRef]] = []
    for ref in chips:
        calls.extend((f"tools/npu-smi/{ref.npu}-{ref.chip}/{kind}.txt", source, ref)
                     for kind, source in NPU_SMI_SNAPSHOTS)
    for device in devices:
        port = ChipRef(npu=device, chip=0, phy_id=device)  # hccn_tool -i takes the device id
        calls.extend((f"tools/hccn_tool/{device}/{command}.txt", source, port) for command, source in HCCN_SNAPSHOTS)
    with ThreadPoolExecutor(max_workers=max(1, tools.parallelism), thread_name_prefix="bundle") as pool:
        futures = [(name, source, chip, pool.submit(call, source, chip)) for name, source, chip in calls]
        for name, source, chip, future in futures:
            if record(name, future.result()) is None and source.tool == "npu-smi":
                direct(name.replace("tools/npu-smi/", "tools/dcmi/").replace(".txt", ".json"), source, chip)
    skipped = tools.skipped()
    say(f"{len(calls) + 1 + bool(chips)} tool calls, {len(chips)} chips, {len(devices)} RoCE ports"
        + (f"; {len(skipped)} tool(s) skipped: {', '.join(skipped)}" if skipped else ""))


# ----------------------------------------------------------------------------- files


def _small_file(writer: _Writer, name: str, path: str, limit: int = MAX_SMALL_FILE) -> None:
    try:
        with open(path, "rb") as handle:
            data = handle.read(limit + 1)
            mtime = os.fstat(handle.fileno()).st_mtime
    except FileNotFoundError:
        writer.manifest.failed.append(f"{path}: not found")
        return
    except OSError as exc:
        writer.manifest.failed.append(f"{path}: {exc.strerror or exc}")
        return
    if len(data) > limit:
        writer.manifest.cut.append(f"{path}: over {limit} bytes, left out")
        return
    writer.add_bytes(name, data, path, mtime)


def _dump_candidates(options: BundleOptions) -> list[str]:
    """Prefixes and directories where flight-recorder dumps may be."""
    places: list[str] = []
    for variable, default in DUMP_ENV_VARS.items():
        value = options.environ.get(variable) or default
        if value not in places:
            places.append(value)
    places.extend(p for p in options.dump_paths if p not in places)
    return places


def _dump_files(place: str, since: float) -> list[tuple[str, os.stat_result]]:
    """Regular files (no symlinks) named ``<prefix>*`` or inside the directory ``place``."""
    if os.path.isdir(place):
        directory, prefix = place, ""
    else:
        directory, prefix = os.path.dirname(place) or ".", os.path.basename(place)
    found: list[tuple[str, os.stat_result]] = []
    try:
        with os.scandir(directory) as entries:
            for entry in entries:
                if not entry.name.startswith(prefix) or entry.is_symlink() or not entry.is_file(follow_symlinks=False):
                    continue
                info = entry.stat(follow_symlinks=False)
                if info.st_mtime >= since:
                    found.append((entry.path, info))
    except OSError:
        return []
    return sorted(found)


def _dumps(writer: _Writer, options: BundleOptions, since: float, say: Callable[[str], None]) -> None:
    count = 0
    for index, place in enumerate(_dump_candidates(options)):
        for path, info in _dump_files(place, since):
            if info.st_size > MAX_DUMP_BYTES:
                writer.manifest.cut.append(f"{path}: dump over {MAX_DUMP_BYTES} bytes, left out")
                continue
            _small_file(writer, f"fr/{index}/{os.path.basename(path)}", path, MAX_DUMP_BYTES)
            count += 1
    say(f"{count} flight-recorder dumps")


def _logs(writer: _Writer, config: Config, options: BundleOptions, since: float, say: Callable[[str], None]) -> None:
    logs = config.collectors.hccl_logs
    found = recent_logs([*map(str, logs.paths), *options.log_paths], logs.globs, logs.kernel_log, since)
    writer.manifest.failed.extend(found.problems)
    if found.capped:
        writer.manifest.cut.append(found.capped)
    recent = found.files
    budget = options.max_log_bytes
    taken = 0
    for mtime, size, path, real in recent:
        if size <= budget:
            start, length = 0, size
        elif budget >= MIN_TAIL_BYTES:
            start, length = size - budget, budget
            writer.manifest.cut.append(f"{path}: kept the newest {length} of {size} bytes")
        else:
            writer.manifest.cut.append(f"{path}: left out ({size} bytes; --max-log-bytes spent)")
            continue
        try:
            writer.add_file("logs/" + path.lstrip("/"), real, start, length, mtime)
        except OSError as exc:
            writer.manifest.failed.append(f"{path}: {exc.strerror or exc}")
            continue
        budget -= length
        taken += 1
    say(f"{taken} log files ({options.max_log_bytes - budget} bytes) of {len(recent)} modified in the window")


def _metrics(writer: _Writer, config: Config) -> None:
    host = config.web.listen_address
    host = "127.0.0.1" if host in ("0.0.0.0", "", "::") else host  # noqa: S104 - the agent's own wildcard bind
    url = f"http://{host}:{int(config.web.port)}/metrics"
    direct = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # never through $http_proxy
    try:
        with direct.open(url, timeout=2.0) as response:
            data = response.read(MAX_METRICS_BYTES + 1)
    except (urllib.error.URLError, OSError, ValueError) as exc:
        writer.manifest.failed.append(f"{url}: {getattr(exc, 'reason', exc)} (is the agent running?)")
        return
    if len(data) > MAX_METRICS_BYTES:
        writer.manifest.cut.append(f"{url}: over {MAX_METRICS_BYTES} bytes, left out")
        return
    writer.add_bytes("metrics.prom", data, url)


def _versions() -> bytes:
    lines = [f"npuwatch {agent.__version__}", f"python {platform.python_version()}",
             f"platform {platform.platform()}", f"hostname {socket.gethostname()}"]
    for path in VERSION_FILES:
        try:
            with open(path, "rb") as handle:
                text = handle.read(65536).decode("utf-8", "replace")
        except OSError:
            continue
        lines.append(f"== {path}")
        lines.append(text.rstrip())
    return ("\n".join(lines) + "\n").encode()


def host_addresses() -> list[str]:
    """This node's IPv4 addresses, loopback left out (how peers' logs may name it)."""
    try:
        import psutil

        found = {address.address for addresses in psutil.net_if_addrs().values() for address in addresses
                 if address.family == socket.AF_INET}
    except (ImportError, OSError):
        found = set()
    return sorted(address for address in found if not address.startswith("127."))


# ----------------------------------------------------------------------------- the bundle


def _node_name(config: Config, options: BundleOptions) -> str:
    return options.node or str(config.labels.get("node") or "") or socket.gethostname()


def _safe(name: str) -> str:
    return "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in name) or "node"


def write_bundle(config: Config, options: BundleOptions, progress: Callable[[str], None] | None = None) -> Path:
    """Write the bundle; returns its path. Tool and file problems go to the manifest, never raise."""
    say = progress or (lambda text: None)
    now = time.time()
    node = _node_name(config, options)
    stamp = time.strftime("%Y%m%d-%H%M%S", time.localtime(now))
    prefix = f"{_safe(node)}-{stamp}"
    output = options.output or Path(f"npuwatch-bundle-{prefix}.tar.gz")
    output.parent.mkdir(parents=True, exist_ok=True)
    since = now - options.since_s
    manifest = _Manifest(node, now, since, addresses=host_addresses())
    manifest.env = {key: options.environ[key] for key in (*DUMP_ENV_VARS, "RANK_TABLE_FILE",
                                                           "ASCEND_PROCESS_LOG_PATH") if options.environ.get(key)}
    handle, temporary = tempfile.mkstemp(prefix=f".{output.name}.", dir=str(output.parent))
    os.close(handle)
    try:
        with tarfile.open(temporary, "w:gz", compresslevel=6) as tar:
            writer = _Writer(tar, prefix, now, manifest)
            _snapshot_tools(config, options, writer, say)
            _small_file(writer, "etc/hccn.conf", str(config.collectors.hccn_tool.hccn_conf), 1 << 20)
            table = options.rank_table or options.environ.get("RANK_TABLE_FILE")
            if table:
                _small_file(writer, f"ranktable/{os.path.basename(table)}", table)
            _dumps(writer, options, since, say)
            _logs(writer, config, options, since, say)
            if options.metrics:
                _metrics(writer, config)
            writer.add_bytes("versions.txt", _versions())
            writer.add_bytes(CONFIG_MEMBER, config_document(config))
            data = manifest.to_json()
            tar.addfile(writer._info("manifest.json", len(data)), io.BytesIO(data))
        os.chmod(temporary, 0o600)
        os.replace(temporary, output)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
    say(f"wrote {output} ({output.stat().st_size} bytes; {len(manifest.cut)} cut, {len(manifest.failed)} failed)")
    return output


def main(args: Any, config: Config, demo_dir: Path | None, out: IO[str] | None = None,
         err: IO[str] | None = None) -> int:
    from agent.core.config_values import parse_duration, parse_size

    stream = out if out is not None else sys.stdout
    errors = err if err is not None else sys.stderr
    try:
        since_s = parse_duration(getattr(args, "since", None) or "2h")
        max_bytes = parse_size(getattr(args, "max_log_bytes", None) or "512MiB")
    except ValueError as exc:
        errors.write(f"npuwatch bundle: bad value {exc}\n")
        return 2
    tool_env = None
    node = getattr(args, "node", None)
    if demo_dir is not None:
        from agent.core.config import apply_overrides
        from agent.demo.node import open_demo

        overrides, tool_env = open_demo(config, Path(demo_dir), int(getattr(args, "demo_chips", 8) or 8))
        config = apply_overrides(config, overrides)
        node = node or Path(demo_dir).resolve().name
    output = getattr(args, "output", None)
    options = BundleOptions(since_s=since_s, output=Path(output) if output else None, node=node,
                            max_log_bytes=max_bytes, log_paths=tuple(getattr(args, "log_path", None) or ()),
                            dump_paths=tuple(getattr(args, "dump_path", None) or ()),
                            rank_table=getattr(args, "rank_table", None), tool_env=tool_env)
    progress = _Progress(errors)
    path = write_bundle(config, options, progress)
    stream.write(f"{path}\n")
    stream.flush()
    return 0
