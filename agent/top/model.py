"""What ``npuwatch top`` shows, read from one ``/metrics`` exposition of the agent: typed, per NPU, and only what
the agent exports (a reading it does not export stays ``None`` and is left off the screen, never guessed).

top judges nothing: each chip's status and lead cause, its active findings and the node's verdict are the
agent's own judgement (``npu_chip_status``, ``npu_fault_since_timestamp_seconds``, ``npu_node_status``:
``agent.health.verdict_metrics``)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

__all__ = ["Collector", "Fetched", "Finding", "HcclRank", "NodeView", "NpuRow", "Probe", "Process", "parse_view",
           "samples_of"]

Sample = tuple[str, Mapping[str, str], float]
Key = tuple[int, int]  # (npu, chip)
_STATUS_RANK = {"ok": 0, "warn": 1, "unknown": 2, "fail": 3}  # agent.health.status's order


@dataclass(frozen=True)
class Finding:
    """One active finding the agent exports: its kind (or check), status (fail, warn) and since when."""

    kind: str
    status: str
    since: float

    @property
    def rank(self) -> int:
        return _STATUS_RANK.get(self.status, 0)


@dataclass
class Process:
    """One process on a chip, as the agent's per-process series say (opt-in: ``per_process_metrics``)."""

    pid: str
    name: str = "?"
    user: str = ""
    memory: float | None = None  # device memory, bytes
    cpu_seconds: float | None = None  # host CPU time so far
    started_at: float | None = None
    command: str = ""

    @property
    def label(self) -> str:
        return f"{self.name} ({self.pid})"


@dataclass
class NpuRow:
    npu: int
    chip: int
    model: str | None = None
    driver: str | None = None
    aicore: float | None = None  # ratio 0..1
    hbm_bandwidth: float | None = None
    hbm_used: float | None = None  # bytes
    hbm_total: float | None = None
    temperature: float | None = None  # °C
    power: float | None = None  # W
    health: str | None = None  # ok, warning, alarm, critical, unknown
    codes: dict[str, str] = field(default_factory=dict)  # active error code -> its handling level
    handling: str | None = None  # the chip's most severe level
    link_up: bool | None = None
    link_transitions: float | None = None  # counter: link-ups since the agent started watching
    link_changed_at: float | None = None
    net_health: str | None = None
    processes: float | None = None
    procs: dict[str, Process] = field(default_factory=dict)  # pid -> the process
    ecc_current: dict[str, float] = field(default_factory=dict)  # bit -> errors now
    ecc_isolated: dict[str, float] = field(default_factory=dict)  # bit -> isolated pages
    hccs_healthy: bool | None = None  # npu_hccs_healthy: one health word for the chip's HCCS links
    optics_rx: dict[str, float] = field(default_factory=dict)  # lane -> W
    optics_tx: dict[str, float] = field(default_factory=dict)
    optics_lost: bool | None = None
    gemm_efficiency: dict[str, float] = field(default_factory=dict)  # dtype -> ratio of peak
    gemm_correct: dict[str, bool] = field(default_factory=dict)
    status: str | None = None  # the agent's: ok, warn, fail, unknown (None: the agent exports no judgement)
    cause: str | None = None  # the kind (or check) that leads on this chip
    faults: dict[str, Finding] = field(default_factory=dict)  # kind -> the active finding

    @property
    def name(self) -> str:
        return f"{self.npu}" if self.chip == 0 else f"{self.npu}.{self.chip}"

    @property
    def rank(self) -> int:
        """How bad the agent judges the chip: 0 ok up to 3 fail (FAIL > UNKNOWN > WARN > ok)."""
        return _STATUS_RANK.get(self.status or "ok", 0)

    def process(self, pid: str) -> Process:
        return self.procs.setdefault(pid, Process(pid))

    def finding(self, *kinds: str) -> Finding | None:
        """The worst active finding of these kinds."""
        found = [self.faults[kind] for kind in kinds if kind in self.faults]
        return max(found, key=lambda f: f.rank) if found else None


@dataclass
class Collector:
    name: str
    up: bool
    reason: str | None = None
    last_success: float | None = None  # npuwatch_collector_last_success_timestamp_seconds
    interval: float | None = None  # npuwatch_collector_interval_seconds (None: an agent that exports none)
    duration: float | None = None  # its last run's


@dataclass(frozen=True)
class HcclRank:
    comm: str
    rank: str
    npu: str
    timed_out_at: float


@dataclass(frozen=True)
class Probe:
    name: str
    last_success: float


@dataclass
class NodeView:
    rows: list[NpuRow] = field(default_factory=list)
    version: str | None = None
    node: str | None = None  # the agent's ``node`` label (config ``labels.node``), when it sets one
    started_at: float | None = None
    collectors: list[Collector] = field(default_factory=list)
    timeouts: list[HcclRank] = field(default_factory=list)  # local ranks that timed out in the incident window
    blamed: list[tuple[str, str, str]] = field(default_factory=list)  # (comm, how, rank or address)
    comm_sizes: dict[str, int] = field(default_factory=dict)
    hccl_errors: dict[str, float] = field(default_factory=dict)  # category -> errors counted since start
    probes: list[Probe] = field(default_factory=list)
    check_verdicts: dict[str, str] = field(default_factory=dict)  # level -> ok, warn, fail, unknown
    check_runs: dict[str, float] = field(default_factory=dict)  # level -> last run time
    status: str | None = None  # the node's verdict (npu_node_status), None when the agent exports none
    cause: str | None = None  # its lead cause
    lead_npu: int | None = None  # the NPU it leads on
    node_faults: dict[str, Finding] = field(default_factory=dict)  # node-wide findings by kind

    @property
    def models(self) -> list[str]:
        return sorted({row.model for row in self.rows if row.model})

    @property
    def drivers(self) -> list[str]:
        return sorted({row.driver for row in self.rows if row.driver})

    @property
    def down(self) -> list[Collector]:
        return [c for c in self.collectors if not c.up]

    def collector(self, name: str) -> Collector:
        """The named collector's entry, made (down until its ``up`` sample says otherwise) on first mention."""
        found = next((c for c in self.collectors if c.name == name), None)
        if found is None:
            found = Collector(name, False)
            self.collectors.append(found)
        return found


@dataclass(frozen=True)
class Fetched:
    """The latest read of the agent: the view of the last good read, when it was, and why the latest failed."""

    view: NodeView | None
    at: float | None  # when ``view`` was read (None: never)
    error: str | None  # why the latest read failed (None: it did not)
    where: str  # the URL or file read
    mode: str | None = None  # said in the header when top reads something other than an agent (standalone)


def samples_of(text: str) -> list[Sample]:
    """The samples of a Prometheus text exposition; ValueError when it is not one."""
    from prometheus_client.parser import text_string_to_metric_families

    samples: list[Sample] = []
    try:
        for family in text_string_to_metric_families(text):
            samples.extend((s.name, s.labels, float(s.value)) for s in family.samples)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"not a Prometheus exposition: {exc}") from None
    return samples


def _key(labels: Mapping[str, str]) -> Key | None:
    npu, chip = labels.get("npu", ""), labels.get("chip", "0")
    if not npu.isdigit() or not chip.isdigit():
        return None
    return int(npu), int(chip)


# metric -> how its value lands on the row: a field name, or a (field, label) pair for per-label dicts
_ROW_VALUES: dict[str, str] = {
    "npu_aicore_utilization_ratio": "aicore",
    "npu_hbm_bandwidth_utilization_ratio": "hbm_bandwidth",
    "npu_hbm_used_bytes": "hbm_used",
    "npu_hbm_total_bytes": "hbm_total",
    "npu_temperature_celsius": "temperature",
    "npu_power_watts": "power",
    "npu_roce_link_up_transitions_total": "link_transitions",
    "npu_roce_link_last_change_timestamp_seconds": "link_changed_at",
    "npu_processes": "processes",
}
_ROW_DICTS: dict[str, tuple[str, str]] = {
    "npu_hbm_ecc_current_errors": ("ecc_current", "bit"),
    "npu_hbm_ecc_isolated_pages": ("ecc_isolated", "bit"),
    "npu_optical_rx_power_watts": ("optics_rx", "lane"),
    "npu_optical_tx_power_watts": ("optics_tx", "lane"),
    "npu_probe_gemm_efficiency_ratio": ("gemm_efficiency", "dtype"),
}


def parse_view(samples: Iterable[Sample]) -> NodeView:
    view = NodeView()
    rows: dict[Key, NpuRow] = {}

    def row(key: Key) -> NpuRow:
        if key not in rows:
            rows[key] = NpuRow(*key)
        return rows[key]

    for name, labels, value in samples:
        key = _key(labels)
        per_npu = name.startswith("npu_") and not name.startswith("npu_hccl_") and name != "npu_node_status"
        if key is not None and per_npu:
            _row_sample(row(key), name, labels, value)
        else:
            _node_sample(view, name, labels, value)
    view.rows = [rows[key] for key in sorted(rows)]
    return view


def _row_sample(row: NpuRow, name: str, labels: Mapping[str, str], value: float) -> None:
    if name in _ROW_VALUES:
        setattr(row, _ROW_VALUES[name], value)
    elif name in _ROW_DICTS:
        attr, label = _ROW_DICTS[name]
        getattr(row, attr)[labels.get(label, "")] = value
    elif name == "npu_info":
        row.model = labels.get("model") or row.model
        row.driver = labels.get("driver") or row.driver
    elif name == "npu_health_state" and value == 1:
        row.health = labels.get("state")
    elif name == "npu_error_code_active" and value == 1:
        row.codes[labels.get("code", "?")] = labels.get("handling", "")
    elif name == "npu_fault_handling" and value == 1:
        row.handling = labels.get("handling")
    elif name == "npu_roce_link_up":
        row.link_up = value == 1
    elif name == "npu_roce_net_health_state" and value == 1:
        row.net_health = labels.get("state")
    elif name == "npu_optical_signal_lost":
        row.optics_lost = value == 1
    elif name == "npu_hccs_healthy":
        row.hccs_healthy = value == 1
    elif name.startswith("npu_process_") and name != "npu_processes":
        _process_sample(row.process(labels.get("pid", "?")), name, labels, value)
    elif name == "npu_probe_gemm_correct":
        row.gemm_correct[labels.get("dtype", "")] = value == 1
    elif name == "npu_chip_status":
        row.status = labels.get("status")
        row.cause = labels.get("cause") or None
    elif name == "npu_fault_since_timestamp_seconds":
        kind = labels.get("kind", "?")
        row.faults[kind] = Finding(kind, labels.get("status", "warn"), value)


def _process_sample(process: Process, name: str, labels: Mapping[str, str], value: float) -> None:
    if name == "npu_process_memory_bytes":
        process.memory = value
        process.name = labels.get("process") or "?"
        process.user = labels.get("user", "")
    elif name == "npu_process_cpu_seconds_total":
        process.cpu_seconds = value
    elif name == "npu_process_start_time_seconds":
        process.started_at = value
    elif name == "npu_process_info":
        process.command = labels.get("command", "")


def _node_sample(view: NodeView, name: str, labels: Mapping[str, str], value: float) -> None:
    if name == "npuwatch_build_info":
        view.version = labels.get("version")
        view.node = labels.get("node") or None
    elif name == "npuwatch_start_time_seconds":
        view.started_at = value
    elif name == "npuwatch_collector_up":
        view.collector(labels.get("collector", "?")).up = value == 1
    elif name == "npuwatch_collector_down_reason" and value == 1:
        view.collector(labels.get("collector", "?")).reason = labels.get("reason")
    elif name == "npuwatch_collector_last_success_timestamp_seconds":
        view.collector(labels.get("collector", "?")).last_success = value
    elif name == "npuwatch_collector_interval_seconds":
        view.collector(labels.get("collector", "?")).interval = value
    elif name == "npuwatch_collector_duration_seconds":
        view.collector(labels.get("collector", "?")).duration = value
    elif name == "npu_hccl_rank_timeout_timestamp_seconds":
        view.timeouts.append(HcclRank(labels.get("comm", "?"), labels.get("rank", "?"), labels.get("npu", "?"), value))
    elif name == "npu_hccl_peer_blamed_timestamp_seconds":
        who = labels.get("rank") or labels.get("address") or "?"
        view.blamed.append((labels.get("comm", "?"), labels.get("how", "?"), who))
    elif name == "npu_hccl_comm_ranks":
        view.comm_sizes[labels.get("comm", "?")] = int(value)
    elif name == "npu_hccl_errors_total":
        category = labels.get("category", "?")
        view.hccl_errors[category] = view.hccl_errors.get(category, 0.0) + value
    elif name == "npuwatch_probe_last_success_timestamp_seconds":
        view.probes.append(Probe(labels.get("probe", "?"), value))
    elif name == "npu_check_verdict" and value == 1:
        view.check_verdicts[labels.get("level", "?")] = labels.get("verdict", "?")
    elif name == "npu_check_last_run_timestamp_seconds":
        view.check_runs[labels.get("level", "?")] = value
    elif name == "npu_node_status":
        view.status = labels.get("status")
        view.cause = labels.get("cause") or None
        npu = labels.get("npu", "")
        view.lead_npu = int(npu) if npu.isdigit() else None
    elif name == "npu_fault_since_timestamp_seconds":
        kind = labels.get("kind", "?")
        view.node_faults[kind] = Finding(kind, labels.get("status", "warn"), value)
