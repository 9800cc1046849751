"""The metric catalogue: every name npuwatch exports, its type, help and label names.

This mirrors the catalogue in DESIGN.md and is the contract that dashboards,
alerts and tests rely on. Each metric has exactly one owning source, so two
commands that print the same value never produce duplicate series.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from collectors.hccl.codes import CATEGORIES

__all__ = ["CATALOGUE", "HCCL_CATEGORIES", "HISTOGRAM_SUFFIXES", "MetricSpec", "family_of", "spec"]

MetricType = Literal["gauge", "counter", "info", "histogram"]
# A histogram's samples are NAME_bucket (its labels and ``le``), NAME_sum and NAME_count (its labels).
HISTOGRAM_SUFFIXES = ("_bucket", "_sum", "_count")


@dataclass(frozen=True)
class MetricSpec:
    name: str
    type: MetricType
    help: str
    labels: tuple[str, ...]
    source: str  # owning collector ("agent" for self-metrics)


CHIP = ("npu", "chip")

# Categories of HCCL/CANN errors found by the log scanner (a contract too): the names of the category table.
HCCL_CATEGORIES: tuple[str, ...] = tuple(category.name for category in CATEGORIES)

_SPECS: tuple[MetricSpec, ...] = (
    # --- npu-smi info table (every 10 s)
    MetricSpec("npu_info", "gauge", "Static facts about a chip (always 1).",
               ("npu", "chip", "model", "bus_id", "logic_id", "serial", "firmware", "driver"),
               "npu_smi_info"),
    MetricSpec("npu_chips", "gauge", "Chips listed by npu-smi now.", (), "npu_smi_info"),
    MetricSpec("npu_healthy", "gauge", "1 when npu-smi reports the chip health OK, else 0.", CHIP,
               "npu_smi_info"),
    MetricSpec("npu_health_state", "gauge", "Chip health as npu-smi reports it; 1 for the current state.",
               (*CHIP, "state"), "npu_smi_info"),
    MetricSpec("npu_power_watts", "gauge", "Chip power draw.", CHIP, "npu_smi_info"),
    MetricSpec("npu_temperature_celsius", "gauge", "Chip (SoC) temperature.", CHIP, "npu_smi_info"),
    MetricSpec("npu_aicore_utilization_ratio", "gauge", "AI Core utilization (0..1).", CHIP,
               "npu_smi_info"),
    MetricSpec("npu_hbm_used_bytes", "gauge", "HBM in use.", CHIP, "npu_smi_info"),
    MetricSpec("npu_hbm_total_bytes", "gauge", "HBM capacity.", CHIP, "npu_smi_info"),
    MetricSpec("npu_memory_used_bytes", "gauge", "Device DDR memory in use.", CHIP, "npu_smi_info"),
    MetricSpec("npu_memory_total_bytes", "gauge", "Device DDR memory capacity.", CHIP, "npu_smi_info"),
    MetricSpec("npu_processes", "gauge", "Processes npu-smi lists on the chip.", CHIP, "npu_smi_info"),
    MetricSpec("npu_process_memory_bytes", "gauge",
               "Device memory used by one process (opt-in: one series per pid).",
               (*CHIP, "pid", "process", "user"), "npu_smi_info"),
    MetricSpec("npu_process_cpu_seconds_total", "counter",
               "Host CPU time (user and system) of one process on the chip (opt-in with npu_process_memory_bytes; "
               "absent for a pid the agent cannot see).", (*CHIP, "pid"), "npu_smi_info"),
    MetricSpec("npu_process_start_time_seconds", "gauge",
               "Unix time one process on the chip started (opt-in with npu_process_memory_bytes).",
               (*CHIP, "pid"), "npu_smi_info"),
    MetricSpec("npu_process_info", "gauge",
               "The command line of one process on the chip, cut to 120 characters (always 1; opt-in with "
               "npu_process_memory_bytes: one series per pid).", (*CHIP, "pid", "command"), "npu_smi_info"),
    # --- npu-smi -t usages / common (every 30 s)
    MetricSpec("npu_aivector_utilization_ratio", "gauge", "AI Vector utilization (0..1).", CHIP,
               "npu_smi_usages"),
    MetricSpec("npu_aicpu_utilization_ratio", "gauge", "AI CPU utilization (0..1).", CHIP,
               "npu_smi_usages"),
    MetricSpec("npu_ctrlcpu_utilization_ratio", "gauge", "Control CPU utilization (0..1).", CHIP,
               "npu_smi_usages"),
    MetricSpec("npu_hbm_bandwidth_utilization_ratio", "gauge", "HBM bandwidth utilization (0..1).",
               CHIP, "npu_smi_usages"),
    MetricSpec("npu_aicore_frequency_hertz", "gauge", "Current AI Core clock.", CHIP, "npu_smi_common"),
    MetricSpec("npu_aicore_max_frequency_hertz", "gauge", "Rated AI Core clock.", CHIP,
               "npu_smi_common"),
    # --- npu-smi -t ecc / health / memory / board / hccs / hccs-bw (every 60 s)
    # The current-count gauge is named *_current_errors: a gauge called
    # npu_hbm_ecc_errors would share its OpenMetrics family name with the
    # npu_hbm_ecc_errors_total counter, which Prometheus rejects.
    MetricSpec("npu_hbm_ecc_current_errors", "gauge",
               "HBM ECC errors counted by the driver since the last reset.", (*CHIP, "bit"),
               "npu_smi_ecc"),
    MetricSpec("npu_hbm_ecc_errors_total", "counter", "HBM ECC errors, lifetime aggregate.",
               (*CHIP, "bit"), "npu_smi_ecc"),
    MetricSpec("npu_hbm_ecc_isolated_pages", "gauge", "HBM pages isolated after ECC errors.",
               (*CHIP, "bit"), "npu_smi_ecc"),
    MetricSpec("npu_error_code_active", "gauge", "An error code npu-smi reports active (always 1); `handling` is "
               "its handling level (docs/fault-codes.md).", (*CHIP, "code", "handling"), "npu_smi_health"),
    MetricSpec("npu_fault_handling", "gauge", "The chip's most severe handling level of its active codes, or "
               "a ManuallySeparateNPU held until `npuwatch faults clear` (always 1; none without a level).",
               (*CHIP, "handling"), "npu_smi_health"),
    MetricSpec("npuwatch_fault_table_skipped_entries", "gauge", "Entries of a fault table file (a rule, a list, a "
               "code) that were invalid and skipped; the rest of the file is used (docs/fault-codes.md).", ("file",),
               "fault_table"),
    MetricSpec("npu_hbm_temperature_celsius", "gauge", "HBM temperature.", CHIP, "npu_smi_memory"),
    MetricSpec("npu_hccs_healthy", "gauge", "1 when the HCCS links report OK.", CHIP, "npu_smi_hccs"),
    # `link` on the three HCCS series is the same number: the HCCS port index, from 0.
    MetricSpec("npu_hccs_errors_total", "counter", "HCCS link error count (link: the port index from 0).",
               (*CHIP, "link"), "npu_smi_hccs"),
    MetricSpec("npu_hccs_retries_total", "counter", "HCCS link retry count (link: the port index from 0).",
               (*CHIP, "link"), "npu_smi_hccs"),
    MetricSpec("npu_hccs_bandwidth_bytes_per_second", "gauge",
               "HCCS link bandwidth (link: the port index from 0, as on npu_hccs_errors_total).",
               (*CHIP, "link", "direction"), "npu_smi_hccs_bw"),
    # --- npu-smi -m / topo (start, every 10 min)
    MetricSpec("npu_topology_link", "gauge", "Link type between two NPUs (always 1).",
               ("npu", "peer", "link_type"), "npu_smi_topo"),
    # --- hccn_tool (RoCE): one port per chip (A3 has one per die), so npu and chip like the rest
    MetricSpec("npu_roce_link_up", "gauge", "1 when the RoCE port link is UP.", CHIP, "hccn_link"),
    MetricSpec("npu_roce_link_up_transitions_total", "counter", "RoCE link-up count from the driver.",
               CHIP, "hccn_link_stat"),
    MetricSpec("npu_roce_link_last_change_timestamp_seconds", "gauge",
               "Time of the newest RoCE link change record.", CHIP, "hccn_link_stat"),
    MetricSpec("npu_roce_net_healthy", "gauge", "1 when hccn_tool net_health says Success.", CHIP,
               "hccn_net_health"),
    MetricSpec("npu_roce_net_health_state", "gauge", "RoCE net health as printed; 1 for the current.",
               (*CHIP, "state"), "hccn_net_health"),
    MetricSpec("npu_roce_errors_total", "counter", "RoCE error and retry counters from hccn_tool -stat.",
               (*CHIP, "counter"), "hccn_stat"),
    MetricSpec("npu_roce_transmitted_bytes_total", "counter",
               "Bytes the RoCE port's MAC sent (hccn_tool -stat mac_tx_total_oct_num).", CHIP, "hccn_stat"),
    MetricSpec("npu_roce_pfc_pause_frames_total", "counter",
               "PFC pause frames the RoCE port received (rx) or sent (tx), all priorities (hccn_tool -stat).",
               (*CHIP, "direction"), "hccn_stat"),
    MetricSpec("npu_optical_temperature_celsius", "gauge", "Optical module temperature.", CHIP,
               "hccn_optical"),
    MetricSpec("npu_optical_tx_power_watts", "gauge", "Optical transmit power per lane.",
               (*CHIP, "lane"), "hccn_optical"),
    MetricSpec("npu_optical_rx_power_watts", "gauge", "Optical receive power per lane.",
               (*CHIP, "lane"), "hccn_optical"),
    MetricSpec("npu_optical_signal_lost", "gauge", "1 when the optical module flags LOS or LoL.",
               CHIP, "hccn_optical"),
    MetricSpec("npu_roce_link_speed_bytes_per_second", "gauge", "RoCE port speed.", CHIP,
               "hccn_speed"),
    MetricSpec("npu_roce_ip_info", "gauge", "The RoCE port's device IP address (always 1).", (*CHIP, "address"),
               "hccn_ip"),
    # --- ascend-dmi (opt-in)
    MetricSpec("npu_dmi_flops", "gauge", "Compute rate measured by ascend-dmi -f (FLOP/s or OP/s).",
               ("npu", "dtype"), "ascend_dmi"),
    MetricSpec("npu_dmi_bandwidth_bytes_per_second", "gauge", "Bandwidth measured by ascend-dmi --bw.",
               ("npu", "path"), "ascend_dmi"),
    # --- HCCL / CANN log scanner
    MetricSpec("npu_hccl_errors_total", "counter", "HCCL/CANN errors found in logs, once per incident.",
               ("code", "category"), "hccl_logs"),
    MetricSpec("npu_hccl_last_error_timestamp_seconds", "gauge", "Time of the newest error per category.",
               ("category",), "hccl_logs"),
    MetricSpec("npuwatch_log_bytes_read_total", "counter", "Log bytes read by the scanner.", (),
               "hccl_logs"),
    # the last incident window (collectors/hccl/incident_window.py): bounded, expiring
    MetricSpec("npu_hccl_rank_last_seen_timestamp_seconds", "gauge",
               "Time this node's HCCL logs last named a local rank of a communicator (kept 7 days).",
               ("comm", "rank", "npu"), "hccl_logs"),
    MetricSpec("npu_hccl_comm_ranks", "gauge", "Ranks in a communicator, as this node's HCCL logs state it.",
               ("comm",), "hccl_logs"),
    MetricSpec("npu_hccl_rank_timeout_timestamp_seconds", "gauge",
               "Time a local rank last reported a failed collective or rendezvous (within the incident window).",
               ("comm", "rank", "npu"), "hccl_logs"),
    MetricSpec("npu_hccl_peer_blamed_timestamp_seconds", "gauge",
               "Time a hint near a local failure last blamed a peer rank or address (within the incident window).",
               ("comm", "how", "rank", "address"), "hccl_logs"),
    MetricSpec("npuwatch_hccl_incident_dropped_total", "counter",
               "Incident-window entries pushed out by its bounds while still current.", ("series",),
               "hccl_logs"),
    # --- probes
    MetricSpec("npu_probe_gemm_flops", "gauge", "GEMM probe rate (FLOP/s).", (*CHIP, "dtype"), "probes"),
    MetricSpec("npu_probe_gemm_efficiency_ratio", "gauge", "GEMM probe rate over the model's peak.",
               (*CHIP, "dtype"), "probes"),
    MetricSpec("npu_probe_gemm_correct", "gauge", "1 when the GEMM product matched the reference.",
               (*CHIP, "dtype"), "probes"),
    MetricSpec("npu_probe_allreduce_algo_bandwidth_bytes_per_second", "gauge",
               "All-reduce algorithm bandwidth (bytes / time).", ("scope", "size_bytes"), "probes"),
    MetricSpec("npu_probe_allreduce_bus_bandwidth_bytes_per_second", "gauge",
               "All-reduce bus bandwidth (algbw x 2(n-1)/n).", ("scope", "size_bytes"), "probes"),
    MetricSpec("npu_probe_allreduce_correct", "gauge", "1 when the all-reduce sums were correct.",
               ("scope",), "probes"),
    # --- the agent's judgement of the node, every round (agent.check.live; docs/health-checks.md#the-agents-verdict)
    MetricSpec("npu_fault_since_timestamp_seconds", "gauge",
               "An active finding of the agent's checks (kind: its fault kind, or the check for one without), "
               "present while found; the value is when it started. Node-wide findings have npu=\"\" chip=\"\".",
               ("npu", "chip", "kind", "status"), "verdict"),
    MetricSpec("npu_chip_status", "gauge", "The chip's status (ok, warn, fail, unknown) and the cause that leads on "
               "it (always 1).", ("npu", "chip", "status", "cause"), "verdict"),
    MetricSpec("npu_node_status", "gauge", "The node's verdict as npuwatch check prints it, its lead cause and the "
               "NPU it leads on (always 1).", ("status", "cause", "npu"), "verdict"),
    # --- npuwatch check, scheduled levels (check.schedule); node-wide results carry npu="" chip=""
    MetricSpec("npu_check_result", "gauge", "1 when the check passed (or warned), 0 when it failed; absent when "
               "it could not tell.", ("level", "check", "npu", "chip"), "check"),
    MetricSpec("npu_check_verdict", "gauge", "The level's verdict: 1 for the current one (ok, warn, fail, unknown).",
               ("level", "verdict"), "check"),
    MetricSpec("npu_check_last_run_timestamp_seconds", "gauge", "When the level last finished a run.", ("level",),
               "check"),
    MetricSpec("npu_check_duration_seconds", "gauge", "How long the level's last run took.", ("level",), "check"),
    MetricSpec("npu_check_bandwidth_bytes_per_second", "gauge",
               "Bandwidth a check measured (measure: hbm_bandwidth, h2d_bandwidth, d2h_bandwidth, p2p_bandwidth, "
               "allreduce, dmi_bandwidth:<path>).", ("level", "measure", "model", "npu", "chip", "peer"), "check"),
    MetricSpec("npu_check_flops", "gauge", "GEMM rate a check measured (measure: gemm:<dtype>, "
               "sustained_gemm:<dtype>).", ("level", "measure", "model", "npu", "chip"), "check"),
    MetricSpec("npuwatch_probe_runs_total", "counter", "Probe runs by outcome.", ("probe", "outcome"),
               "probes"),
    MetricSpec("npuwatch_probe_timeouts_total", "counter", "Probe runs killed at the deadline, by stage.",
               ("probe", "stage"), "probes"),
    MetricSpec("npuwatch_probe_last_success_timestamp_seconds", "gauge", "Time of the last passing probe.",
               ("probe",), "probes"),
    MetricSpec("npuwatch_probe_duration_seconds", "gauge", "Duration of the last probe run.", ("probe",),
               "probes"),
    # --- host (psutil)
    MetricSpec("npuwatch_host_cpu_utilization_ratio", "gauge", "Host CPU utilization (0..1).", (), "host"),
    MetricSpec("npuwatch_host_load1", "gauge", "Host 1-minute load average.", (), "host"),
    MetricSpec("npuwatch_host_memory_used_bytes", "gauge", "Host memory in use.", (), "host"),
    MetricSpec("npuwatch_host_memory_total_bytes", "gauge", "Host memory capacity.", (), "host"),
    MetricSpec("npuwatch_host_disk_used_bytes", "gauge", "Used bytes on a filesystem.", ("mountpoint",),
               "host"),
    MetricSpec("npuwatch_host_disk_total_bytes", "gauge", "Size of a filesystem.", ("mountpoint",), "host"),
    MetricSpec("npuwatch_host_network_receive_bytes_total", "counter", "Bytes received per interface.",
               ("device",), "host"),
    MetricSpec("npuwatch_host_network_transmit_bytes_total", "counter", "Bytes sent per interface.",
               ("device",), "host"),
    # --- Kubernetes: who holds each chip (kubelet pod-resources API, on its own schedule)
    MetricSpec("npu_pod_info", "gauge",
               "A container holds the chip through the device plugin (always 1; absent when no pod holds it).",
               (*CHIP, "namespace", "pod", "container"), "pod_resources"),
    MetricSpec("npuwatch_pod_attribution_unmapped_devices", "gauge",
               "Device IDs of the configured resources that name no chip npu-smi lists on this node.", (),
               "pod_resources"),
    # --- who runs on each chip: job and rank from the process's environment (on the info interval)
    MetricSpec("npu_job_info", "gauge",
               "Job and rank of the process on the chip, from its environment or rank table (always 1; one series "
               "per chip, absent when no process on it names a job or a rank).",
               (*CHIP, "training_job", "rank", "local_rank", "world_size", "source"), "npu_jobs"),
    MetricSpec("npuwatch_job_info_failures_total", "counter",
               "Processes on the chips whose environment (or rank table) could not be read, by reason "
               "(access_denied, gone, zombie, rank_table); each process is counted once.",
               ("reason",), "npu_jobs"),
    # --- the agent itself
    MetricSpec("npuwatch_build_info", "gauge", "npuwatch version (always 1).", ("version", "python"),
               "agent"),
    MetricSpec("npuwatch_expected_chips", "gauge", "Chips this node should have (config; 0 = unknown).",
               (), "agent"),
    MetricSpec("npuwatch_start_time_seconds", "gauge", "Unix time the agent's process started.", (), "agent"),
    MetricSpec("npuwatch_config_last_reload_successful", "gauge",
               "1 when the last config load (the start, or a SIGHUP) worked; 0 while a failed reload keeps "
               "the running config.", (), "agent"),
    MetricSpec("npuwatch_config_last_reload_success_timestamp_seconds", "gauge",
               "Unix time of the last config load that worked.", (), "agent"),
    MetricSpec("npuwatch_collector_up", "gauge", "1 when the collector's last run succeeded.",
               ("collector",), "agent"),
    MetricSpec("npuwatch_collector_down_reason", "gauge",
               "1 for why the collector is down (present only while npuwatch_collector_up is 0).",
               ("collector", "reason"), "agent"),
    MetricSpec("npuwatch_collector_duration_seconds", "gauge", "Duration of the collector's last run.",
               ("collector",), "agent"),
    MetricSpec("npuwatch_collector_last_success_timestamp_seconds", "gauge",
               "Time of the collector's last successful run.", ("collector",), "agent"),
    MetricSpec("npuwatch_collector_interval_seconds", "gauge",
               "How often the collector runs (npuwatch top marks a reading stale when its collector's last "
               "success is older than this, half of it again, the run's duration and 2 s).", ("collector",), "agent"),
    MetricSpec("npuwatch_collector_errors_total", "counter", "Collector failures by reason.",
               ("collector", "reason"), "agent"),
    MetricSpec("npuwatch_parse_rejections_total", "counter",
               "Lines or values of tool output refused as impossible or malformed (the rest of the output is kept), "
               "and whole outputs refused (a parse error: nothing of that output is kept).",
               ("collector",), "agent"),
    # --- the DCMI helper (docs/dcmi.md; present only while DCMI is in use)
    MetricSpec("npuwatch_collector_backend_readings", "gauge",
               "Readings of the collector's last run by the backend that served them: dcmi, or tool (npu-smi, "
               "hccn_tool).", ("collector", "backend"), "dcmi"),
    MetricSpec("npuwatch_dcmi_helper_up", "gauge",
               "1 while the DCMI helper process answers; 0 before its first call and while it is being "
               "restarted (npu-smi serves meanwhile).", (), "dcmi"),
    MetricSpec("npuwatch_dcmi_helper_starts_total", "counter", "DCMI helper processes started.", (), "dcmi"),
    MetricSpec("npuwatch_dcmi_helper_restarts_total", "counter",
               "DCMI helper processes started after one was killed (deadline, crash, unreadable answer).", (),
               "dcmi"),
    MetricSpec("npuwatch_dcmi_calls_total", "counter", "Calls into libdcmi.so through the helper.", (), "dcmi"),
    MetricSpec("npuwatch_dcmi_call_seconds_total", "counter", "Wall time spent in DCMI calls.", (), "dcmi"),
    MetricSpec("npuwatch_dcmi_call_errors_total", "counter",
               "DCMI calls that failed, by kind: the library's (unsupported, dcmi, invalid, bad_request) or the "
               "helper's (startup, timeout, died, protocol, backoff, busy, closed); timeout counts a call that hung "
               "(the helper answered for it and runs on) or a helper killed at the deadline, backoff a call not made "
               "while the helper, or that call after hanging, waits out its backoff.", ("kind",), "dcmi"),
    MetricSpec("npuwatch_dcmi_fallbacks_total", "counter",
               "Readings of a DCMI-served collector that its tool served instead.", ("collector",), "dcmi"),
    MetricSpec("npuwatch_dcmi_unverified", "gauge",
               "1 while no npu-smi reading has vouched for the DCMI readings (no npu-smi to compare with, or "
               "it did not answer).", (), "dcmi"),
    MetricSpec("npuwatch_dcmi_field_disagreements", "gauge",
               "1 for each field the trust check moved back to npu-smi because DCMI disagreed with it.",
               ("collector", "field"), "dcmi"),
    # --- DCMI fault events (docs/dcmi.md; present only while DCMI is in use)
    MetricSpec("npuwatch_dcmi_events_total", "counter",
               "Fault events the driver sent through the DCMI subscription, by chip, severity (warning, minor, "
               "major, critical) and assertion (raised, recovery, once).",
               (*CHIP, "severity", "assertion"), "dcmi_events"),
    MetricSpec("npuwatch_dcmi_events_dropped_total", "counter",
               "Fault events that could not be applied, by reason: unreadable, unknown_chip (a deviceid no "
               "listed chip has), no_code (event id 0: malformed, names no fault), duplicate (a copy of an event "
               "applied already: a library that replays its events to a new helper).", ("reason",), "dcmi_events"),
    MetricSpec("npuwatch_dcmi_events_missed_total", "counter",
               "Fault events the driver raised while no DCMI helper held the subscription (a restart's gap) that "
               "never arrived: the gap in their serial numbers across the restart.", (), "dcmi_events"),
    MetricSpec("npuwatch_dcmi_last_event_timestamp_seconds", "gauge",
               "When the last fault event reached the DCMI helper (the host's clock).", (), "dcmi_events"),
    MetricSpec("npuwatch_dcmi_event_latency_seconds", "histogram",
               "From a raised or one-off fault event's alarm_raised_time to the agent's update of the node model "
               "(a recovery carries its fault's raise time, so it is not observed).", (), "dcmi_events"),
    MetricSpec("npuwatch_dcmi_subscription_up", "gauge",
               "1 while the DCMI helper runs with its fault-event subscription in place, else 0.", (),
               "dcmi_events"),
    MetricSpec("npuwatch_dcmi_subscription_available", "gauge",
               "1 when the library offers fault events (it has dcmi_subscribe_fault_event and did not answer "
               "not-supported), 0 when it does not; absent until a helper has started.", (), "dcmi_events"),
)

CATALOGUE: dict[str, MetricSpec] = {s.name: s for s in _SPECS}


def family_of(metric: str) -> str | None:
    """The catalogue name a sample's metric belongs to: itself, or the histogram it is a part of."""
    if metric in CATALOGUE:
        return metric
    for suffix in HISTOGRAM_SUFFIXES:
        base = metric.removesuffix(suffix)
        if base != metric and base in CATALOGUE and CATALOGUE[base].type == "histogram":
            return base
    return None


def spec(name: str) -> MetricSpec:
    """The catalogue entry for ``name``; a KeyError names the unknown metric."""
    return CATALOGUE[name]
