"""Every setting of the config file, once: one frozen dataclass per section, nested as the YAML is.

Each leaf names its checker, its default and its line of docs/configuration.md (``scripts/gen_docs.py``
writes the reference from these classes); the annotation is the type the loaded value has, so
``config.collectors.npu_smi.interval`` is a float to mypy and a misspelt key is a type error.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, cast, get_args

from agent.core.config_fields import ConfigSection, derived, section, setting
from agent.core.config_values import (
    AutoOrBool,
    Checker,
    auto_or_boolean,
    boolean,
    choice,
    cron_expression,
    duration,
    int_list,
    integer,
    labels_map,
    listen_host,
    optional,
    peaks_table,
    positive_duration,
    positive_float,
    ratio,
    references_table,
    str_list,
    string,
)
from agent.core.config_values import interval as every
from agent.core.config_values import size as byte_size
from agent.health.probe_limits import (
    FLEET_FAIL,
    FLEET_MIN_NODES,
    FLEET_WARN,
    PEER_FAIL,
    REFERENCE_FAIL,
    REFERENCE_WARN,
    THROTTLE_FAIL,
    THROTTLE_WARN,
)

__all__ = [
    "DEFAULT_PORT",
    "AllreduceSection",
    "AscendDmiSection",
    "CheckScheduleSection",
    "CheckSection",
    "CollectorsSection",
    "Config",
    "CpuRanksSection",
    "DcmiSection",
    "FaultsSection",
    "GemmSection",
    "HcclLogsSection",
    "HccnToolSection",
    "HostSection",
    "KubernetesSection",
    "LevelSchedule",
    "NpuSmiSection",
    "ProbeBackend",
    "ProbesSection",
    "TextfileSection",
    "WebSection",
]

DEFAULT_PORT = 9611

ProbeBackend = Literal["auto", "npu", "cuda", "cpu"]
_probe_backend = cast("Checker[ProbeBackend]", choice(*get_args(ProbeBackend)))


def _labels_with_node(labels: Mapping[str, str] | None) -> Mapping[str, str]:
    """The configured labels, with ``node`` from ``$NODE_NAME`` when the config sets none."""
    result = dict(labels or {})
    node_name = os.environ.get("NODE_NAME")
    if "node" not in result and node_name:
        result["node"] = node_name
    return result


def _log_paths(paths: tuple[str, ...] | None) -> tuple[str, ...]:
    if paths is not None:
        return paths
    return (os.environ.get("ASCEND_PROCESS_LOG_PATH") or str(Path("~/ascend/log").expanduser()),)


@dataclass(frozen=True)
class WebSection(ConfigSection):
    enabled: bool = setting(boolean, True,
                            "serve HTTP; `false` with `textfile.enabled` serves only through the textfile")
    listen_address: str = setting(listen_host, "0.0.0.0",  # noqa: S104 - an exporter listens for Prometheus
                                  "address `/metrics`, `/healthz` and `/readyz` listen on (an IPv6 one may be "
                                  "bracketed; its port is `web.port`)")
    port: int = setting(integer(1, 65535), DEFAULT_PORT, "port they listen on (1-65535)")
    config_file: str | None = setting(optional(string), None,
                                      "TLS and basic auth, in the exporter-toolkit web config format; reloaded "
                                      "when it (or a certificate it names) changes, and on SIGHUP")
    max_connections: int = setting(integer(1, 1024), 32,
                                   "open HTTP connections; when full, a new one closes the longest-idle "
                                   "connection of the address that holds the most")
    max_connections_per_client: int = setting(integer(1, 1024), 4,
                                              "per client IP address: idle connections (a new one closes the "
                                              "address's longest-idle one) and requests in progress (a further "
                                              "one waits up to 1 s for a turn)")


@dataclass(frozen=True)
class FaultsSection(ConfigSection):
    codes_file: str | None = setting(optional(string), None,
                                     "a newer `faultCode.json` (the Ascend device plugin's format: `<Level>Codes` "
                                     "lists) for the `handling` levels of error codes; none: the packaged table "
                                     "(docs/fault-codes.md)")
    escalation_file: str | None = setting(optional(string), None,
                                          "a newer `faultCustomization.json` (`FaultFrequency`, `FaultDuration`) "
                                          "for escalation; none: the packaged rules")


@dataclass(frozen=True)
class TextfileSection(ConfigSection):
    enabled: bool = setting(boolean, False, "write `npuwatch.prom` atomically for node_exporter's textfile collector")
    directory: str = setting(string, "/var/lib/node_exporter/textfile_collector", "where `npuwatch.prom` is written")
    interval: float = setting(every, 15.0, "how often it is written")


@dataclass(frozen=True)
class NpuSmiSection(ConfigSection):
    enabled: bool = setting(boolean, True, "the npu-smi collectors")
    path: str | None = setting(optional(string), None,
                               "npu-smi; none: on PATH, else `/usr/local/sbin`, `/usr/local/Ascend/driver/tools`, ...")
    interval: float = setting(every, 10.0, "the `npu-smi info` table")
    usages_interval: float = setting(every, 30.0, "`-t usages`, `-t common`")
    health_interval: float = setting(every, 60.0,
                                     "`-t ecc`, `health`, `memory`, `board`, `hccs`, `hccs-bw`")
    inventory_interval: float = setting(every, 600.0, "`-m`, `-t topo` (also run at start)")
    timeout: float = setting(positive_duration, 10.0, "per call; the process group is killed after it")
    max_parallel: int = setting(integer(1, 16), 2, "npu-smi processes at once (per-chip calls share this pool)")
    per_process_metrics: bool = setting(boolean, False,
                                        "export `npu_process_memory_bytes`, `npu_process_cpu_seconds_total`, "
                                        "`npu_process_start_time_seconds` and `npu_process_info` "
                                        "(one series each per pid)")
    job_info: bool = setting(boolean, True,
                             "export `npu_job_info` (job and rank of the process on each chip, from its environment "
                             "or rank table; one series per chip) on this interval")
    job_variables: tuple[str, ...] = setting(str_list, (),
                                             "environment variables that name a process's job, read before the "
                                             "built-in ones (`SLURM_JOB_ID`, `JOB_ID`, `MASTER_ADDR`, ...: "
                                             "docs/metrics.md), e.g. one a Kubernetes job sets from a pod label "
                                             "through the downward API")
    max_chips: int = setting(integer(1, 4096), 64,
                             "a table listing more chips is refused as broken output (`npu_smi_info` up 0, "
                             "reason `parse`)")
    disable: tuple[str, ...] = setting(str_list, (),
                                       "source names to skip, e.g. `[npu_smi_hccs_bw]` on boards without HCCS")
    enable: tuple[str, ...] = setting(str_list, (), "opt-in sources: `npu_smi_topo` (`npu_topology_link`)")


# The fail-slow signals' sampling (docs/failslow.md#signals): the rules' rates need a sample every 5 s.
FAILSLOW_S: float | None = 5.0


@dataclass(frozen=True)
class DcmiSection(ConfigSection):
    enabled: AutoOrBool = setting(auto_or_boolean, "auto",
                                  "read chips through the driver's library `libdcmi.so` (docs/dcmi.md): `auto` "
                                  "uses it when found and vetted, with npu-smi as fallback per reading; `true` the "
                                  "same, warning when none is found; `false` never; read at start")
    library: str | None = setting(optional(string), None,
                                  "path of `libdcmi.so`, used as given (a warning when not root-owned or "
                                  "group-writable; refused when any user could replace it: see "
                                  "`allow_writable_library`); none: `LD_LIBRARY_PATH`, `ldconfig -p`, "
                                  "`/usr/local/dcmi`, `/usr/local/Ascend/driver/lib64/driver`")
    allow_writable_library: bool = setting(boolean, False,
                                           "load the configured `library` even when the file, or a directory "
                                           "above it without the sticky bit, is writable by any user (who could "
                                           "then run code as the agent); false: it is refused and npu-smi reads "
                                           "the chips")
    call_timeout: float = setting(positive_duration, 5.0,
                                  "deadline of each DCMI call; the worker process is killed and restarted after it")
    npu_smi_interval: float = setting(every, 240.0,
                                      "with DCMI in use, the npu-smi sources it does not serve (`-t board`, "
                                      "`hccs`, `hccs-bw`) run this often instead of `health_interval`: 3 calls per "
                                      "chip every 4 minutes keep npu-smi under one process per chip per minute")
    verify_interval: float = setting(every, 21600.0,
                                     "how often one chip is read through both DCMI and npu-smi and the shared "
                                     "fields compared (also at start); a field that disagrees gives its collector "
                                     "back to npu-smi")
    failslow_interval: float | None = setting(optional(every), FAILSLOW_S,
                                              "with DCMI in use, each chip's AI Core busy fraction and clock "
                                              "(`npu_aicore_utilization_ratio`, `npu_aicore_frequency_hertz`) are "
                                              "exported this often, the clock read for it, every chip in one round "
                                              "trip to the helper (the `npu_fast` collector; "
                                              "docs/failslow.md#signals), and the busy fraction the mean of "
                                              "`failslow_reads` readings in it; none: at the npu-smi intervals, as "
                                              "without DCMI")
    failslow_reads: int = setting(integer(1, 10), 5,
                                  "how many times in each `failslow_interval` the AI Core busy fraction is read: "
                                  "every `failslow_interval / failslow_reads` (at least 1 s; one round trip of one "
                                  "call a chip), and the exported value is the mean of the chip's readings over the "
                                  "last `failslow_interval`, less noisy than one reading "
                                  "(docs/failslow.md#signals); 1: read with the clock")
    lock_file: str = setting(string, "/run/npuwatch/dcmi.lock",
                             "one npuwatch process on the node calls DCMI at a time: every process that uses DCMI "
                             "takes this lock")


@dataclass(frozen=True)
class HccnToolSection(ConfigSection):
    enabled: bool = setting(boolean, True, "the RoCE collectors (no hccn_tool = no data, not an error)")
    path: str | None = setting(optional(string), None, "hccn_tool; none: on PATH, else the standard Ascend locations")
    interval: float = setting(every, 60.0, "every hccn_tool source (`-link`, `-link_stat`, "
                              "`-net_health`, `-optical`, `-stat`, `-speed`, `-ip`)")
    stat_interval: float | None = setting(optional(every), FAILSLOW_S,
                                          "`-stat` alone (the port's bytes, PFC pause frames and error counters "
                                          "that fail-slow's `link` cause compares: docs/failslow.md#signals), one "
                                          "process per chip; none: at `interval`")
    timeout: float = setting(positive_duration, 10.0, "per call; the process group is killed after it")
    max_parallel: int = setting(integer(1, 16), 2,
                                "hccn_tool processes at once (a pool of its own, so a slow RoCE pass never delays "
                                "npu-smi)")
    disable: tuple[str, ...] = setting(str_list, (), "source names to skip")
    hccn_conf: str = setting(string, "/etc/hccn.conf",
                             "expected device IPs (`diagnose`, `check`'s `roce_ip`; `bundle` copies it)")


@dataclass(frozen=True)
class AscendDmiSection(ConfigSection):
    enabled: bool = setting(boolean, False, "ascend-dmi `-f` / `--bw`: slow and intrusive")
    path: str | None = setting(optional(string), None,
                               "ascend-dmi; none: on PATH, else the standard Ascend locations")
    interval: float = setting(every, 86400.0, "how often it runs")
    timeout: float = setting(positive_duration, 900.0, "per call")
    require_idle: bool = setting(boolean, True,
                                 "run ascend-dmi only when no NPU process runs and AI Cores are idle (false: also "
                                 "while jobs use the NPUs)")


@dataclass(frozen=True)
class HcclLogsSection(ConfigSection):
    enabled: bool = setting(boolean, True, "the CANN/HCCL log scanner")
    interval: float = setting(every, 15.0, "scan cadence")
    paths: tuple[str, ...] = derived(optional(str_list), None,
                                     "CANN log roots (`debug/plog`, `run/plog`, `debug/device-*`); none: "
                                     "`$ASCEND_PROCESS_LOG_PATH`, else `~/ascend/log`", _log_paths)
    globs: tuple[str, ...] = setting(str_list, (),
                                     "extra job-log globs (`*`, `?`, `[..]`, `**`; under `**` symlinked directories "
                                     "are not followed and no directory is entered twice; a walk stops after "
                                     "200,000 directory entries and says so)")
    kernel_log: str | None = setting(optional(string), None, "a kernel log file to scan for `Heartbeat lost!`")
    first_start_window: float = setting(duration, 3600.0, "on first start only files modified within this are read")
    byte_budget: int = setting(byte_size, 64 << 20, "bytes read per cycle, so a 10 GB log cannot stall the agent")
    incident_window: float = setting(positive_duration, 3600.0,
                                     "how long a rank's timeout and the peers its logs blame stay exported "
                                     "(`npu_hccl_rank_timeout_timestamp_seconds`, "
                                     "`npu_hccl_peer_blamed_timestamp_seconds`); the window of "
                                     "HCCLCulpritSuspected")


@dataclass(frozen=True)
class HostSection(ConfigSection):
    enabled: bool = setting(boolean, True, "psutil host metrics (`npuwatch_host_*`)")
    interval: float = setting(every, 15.0, "how often they are read")
    mountpoints: tuple[str, ...] = setting(str_list, ("/",), "file systems of `npuwatch_host_disk_*`")


@dataclass(frozen=True)
class CpuRanksSection(ConfigSection):
    enabled: bool = setting(boolean, False,
                            "fail-slow's cpu backend (docs/failslow.md#cpu-ranks): where there is no NPU, each local "
                            "training rank process (its environment names a rank) stands for a chip: "
                            "`npu_aicore_utilization_ratio` is its busy fraction, `npu_roce_transmitted_bytes_total` "
                            "the bytes it writes, `npu_job_info` its job and rank; refused unless "
                            "`collectors.npu_smi.enabled`, `collectors.dcmi.enabled` and "
                            "`collectors.hccn_tool.enabled` are false, so it never exports beside a chip's own "
                            "readings")
    interval: float = setting(every, 5.0, "how often the ranks are read (the fail-slow rules want 5 s)")


@dataclass(frozen=True)
class CollectorsSection(ConfigSection):
    npu_smi: NpuSmiSection = section(NpuSmiSection)
    dcmi: DcmiSection = section(DcmiSection)
    hccn_tool: HccnToolSection = section(HccnToolSection)
    ascend_dmi: AscendDmiSection = section(AscendDmiSection)
    hccl_logs: HcclLogsSection = section(HcclLogsSection)
    host: HostSection = section(HostSection)
    cpu_ranks: CpuRanksSection = section(CpuRanksSection)


_FIRST_RUN_DOC = "the first run this long after start; none: at random within `jitter`"
_CRON_DOC = "a crontab schedule instead of `interval`"


@dataclass(frozen=True)
class GemmSection(ConfigSection):
    enabled: bool = setting(boolean, True, "the GEMM probe")
    interval: float = setting(every, 3600.0, "how often it runs")
    cron: str | None = setting(optional(cron_expression), None, _CRON_DOC)
    jitter: float = setting(duration, 300.0, "up to this much is added to each run's time")
    first_run: float | None = setting(optional(duration), None, _FIRST_RUN_DOC)
    size: int | None = setting(optional(integer(16, 65536)), None,
                               "matrix size; none: the backend's default (8192 on npu/cuda, 1024 on cpu)")
    dtypes: tuple[str, ...] | None = setting(optional(str_list), None,
                                             "dtypes; none: the backend's default (fp16 and bf16 on npu/cuda, fp32 "
                                             "on cpu)")
    min_efficiency: float = setting(ratio, REFERENCE_FAIL.value,
                                    "pass threshold: FLOP/s over the model's expected peak")


@dataclass(frozen=True)
class AllreduceSection(ConfigSection):
    enabled: bool = setting(boolean, True, "the node all-reduce probe")
    interval: float = setting(every, 6 * 3600.0, "how often it runs")
    cron: str | None = setting(optional(cron_expression), None, _CRON_DOC)
    jitter: float = setting(duration, 900.0, "up to this much is added to each run's time")
    first_run: float | None = setting(optional(duration), None, _FIRST_RUN_DOC)
    size: int | None = setting(optional(byte_size), None,
                               "message size; none: the backend's default (256 MiB on npu/cuda)")
    devices: tuple[int, ...] | None = setting(optional(int_list), None, "devices taking part; none: all")
    min_bus_bandwidth: float | None = setting(optional(positive_float), None,
                                              "pass threshold in bytes/s; none: no threshold")


@dataclass(frozen=True)
class ProbesSection(ConfigSection):
    enabled: bool = setting(boolean, True, "GEMM and all-reduce probes in the agent")
    python: str | None = setting(optional(string), None,
                                 "interpreter with torch (and torch_npu on NPU nodes); none: the agent's interpreter")
    backend: ProbeBackend = setting(_probe_backend, "auto",
                           "`auto`, `npu`, `cuda`, `cpu`; `auto` picks the first that works")
    model: str | None = setting(optional(string), None, "chip model for the expected-peak table; none: from npu-smi")
    lock_file: str = setting(string, "/run/npuwatch/probe.lock", "shared with manual `npuwatch probe` runs")
    idle_aicore_threshold: float = setting(ratio, 0.05,
                                           "probes run only below this AI Core utilization and with no NPU process")
    connect_timeout: float = setting(positive_duration, 120.0,
                                     "`HCCL_CONNECT_TIMEOUT` (clamped to what HCCL accepts: 120 s minimum)")
    exec_timeout: float = setting(positive_duration, 120.0,
                                  "`HCCL_EXEC_TIMEOUT` (clamped to what HCCL accepts: 68 s minimum)")
    deadline: float = setting(positive_duration, 600.0,
                              "the outer watchdog: the worker's process group is killed then")
    stall: float | None = setting(optional(positive_duration), None,
                                  "kill a probe that makes no progress this long in connect or exec")
    peaks: Mapping[str, Mapping[str, float]] | None = setting(
        optional(peaks_table), None, "`{model: {dtype: FLOP/s}}` overrides and additions to the built-in peak table")
    gemm: GemmSection = section(GemmSection)
    allreduce: AllreduceSection = section(AllreduceSection)


_BUSY_LEVEL_DOC = "the agent runs the {level} level when the NPUs are idle (busy: tried again 10 min later)"
_LEVEL_FIRST_RUN_DOC = "the first run this long after the agent starts (interval schedules)"


@dataclass(frozen=True)
class LevelSchedule(ConfigSection):
    """When the agent runs one check level; ``CheckScheduleSection`` sets each level's own defaults."""

    enabled: bool = setting(boolean, False, _BUSY_LEVEL_DOC.format(level="medium"))
    interval: float = setting(every, 86400.0, "how often")
    cron: str | None = setting(optional(cron_expression), None, _CRON_DOC)
    first_run: float = setting(duration, 600.0, _LEVEL_FIRST_RUN_DOC)


@dataclass(frozen=True)
class CheckScheduleSection(ConfigSection):
    quick: LevelSchedule = section(
        LevelSchedule, defaults={"interval": 300.0, "first_run": 60.0},
        docs={"enabled": "the agent exports its own judgement of the round as the quick level (`npu_check_*`), no "
                         "tool run again"})
    medium: LevelSchedule = section(LevelSchedule)
    long: LevelSchedule = section(LevelSchedule, defaults={"interval": 7 * 86400.0, "first_run": 1800.0},
                                  docs={"enabled": _BUSY_LEVEL_DOC.format(level="long")})

    def level(self, name: str) -> LevelSchedule:
        """The schedule of the level called ``name`` (KeyError for a name that is not a level)."""
        return {"quick": self.quick, "medium": self.medium, "long": self.long}[name]


@dataclass(frozen=True)
class CheckSection(ConfigSection):
    """``npuwatch check`` and the agent's scheduled levels (agent/check/)."""

    tool_timeout: float = setting(positive_duration, 4.0,
                                  "each npu-smi/hccn_tool call of `npuwatch check`, at most the collector's own "
                                  "timeout (the quick level must answer in 10 s)")
    max_parallel: int = setting(integer(1, 16), 4,
                                "npu-smi calls at once during a check (at least `collectors.npu_smi.max_parallel`)")
    flap_window: float | None = setting(optional(positive_duration), None,
                                        "`roce_flaps` look-back (two link-down events in it fail, one warns); none: "
                                        "the thresholds table's (15 min)")
    hccl_window: float | None = setting(optional(positive_duration), None,
                                        "`hccl_errors` look-back of check and diagnose (`--window` wins): HCCL/CANN "
                                        "log errors this recent warn; none: the thresholds table's incident "
                                        "look-back (2 h)")
    max_isolated_pages: int | None = setting(optional(integer(0)), None,
                                             "`hbm_ecc` fails above this many isolated HBM pages (warns above 0); "
                                             "none: the thresholds table's")
    expected_driver: str | None = setting(optional(string), None,
                                          "`versions` also fails a card on another driver version")
    expected_firmware: str | None = setting(optional(string), None,
                                            "`versions` also fails a card on another firmware version")
    skip: tuple[str, ...] = setting(str_list, (),
                                    "checks this node never runs, e.g. `[hccs, roce_ip]` (`dmi_diag_<item>` for one "
                                    "ascend-dmi item)")
    references: Mapping[str, Mapping[str, float]] | None = setting(
        optional(references_table), None,
        "`{model: {measure: value}}` in base units, e.g. `{910B3: {hbm_bandwidth: 1.5e12}}`; wins over the "
        "built-in figures")
    fail_ratio: float = setting(ratio, REFERENCE_FAIL.value,
                                "a measurement below this share of its reference figure fails")
    warn_ratio: float = setting(ratio, REFERENCE_WARN.value,
                                "a measurement below this share of its reference figure warns")
    baseline_file: str | None = setting(optional(string), None, "fleet medians (JSON); `--baseline` wins")
    prometheus_url: str | None = setting(optional(string), None, "fleet medians from Prometheus; `--prometheus` wins")
    fleet_fail_ratio: float = setting(ratio, FLEET_FAIL.value,
                                      "a measurement below this share of the fleet median fails")
    fleet_warn_ratio: float = setting(ratio, FLEET_WARN.value,
                                      "a measurement below this share of the fleet median warns")
    fleet_min_nodes: int = setting(integer(1), FLEET_MIN_NODES, "a fleet median over fewer nodes is not used")
    max_temperature: float | None = setting(optional(positive_float), None,
                                            "`temperature` and `sustained_gemm` fail a chip hotter than this (°C); "
                                            "none: the thresholds table's `chip_too_hot` (95)")
    sustained_duration: float | None = setting(optional(positive_duration), None,
                                               "`sustained_gemm`: time under load; none: the worker's default "
                                               "(npu/cuda 3m, cpu 10s; cut to fit the long level's 15 min)")
    max_throttle_drop: float = setting(ratio, THROTTLE_FAIL.value,
                                       "`sustained_gemm` fails a chip whose slowest window falls this far below "
                                       "its best")
    warn_throttle_drop: float = setting(ratio, THROTTLE_WARN.value,
                                        "`sustained_gemm` warns a chip whose slowest window falls this far below "
                                        "its best")
    min_peer_ratio: float = setting(ratio, PEER_FAIL.value,
                                    "bandwidth checks: a chip (or pair) below this share of the median of its kind "
                                    "in the same run fails, so one slow link of 56 is found without a reference")
    copy_size: int | None = setting(optional(byte_size), None,
                                    "buffer of the bandwidth checks; none: the worker's default")
    schedule: CheckScheduleSection = section(CheckScheduleSection)


@dataclass(frozen=True)
class KubernetesSection(ConfigSection):
    pod_attribution: AutoOrBool = setting(auto_or_boolean, "auto",
                                          "`npu_pod_info` from the kubelet's pod-resources API: `true`, `false`, or "
                                          "`auto` (on when the agent runs in a Kubernetes pod, i.e. "
                                          "`KUBERNETES_SERVICE_HOST` is set); needs the `k8s` extra (grpcio, "
                                          "protobuf)")
    pod_resources_socket: str = setting(string, "/var/lib/kubelet/pod-resources/kubelet.sock",
                                        "the kubelet's socket (missing = no data, not an error)")
    interval: float = setting(every, 15.0, "how often the kubelet is asked")
    timeout: float = setting(positive_duration, 5.0, "the deadline of each kubelet call")
    resources: tuple[str, ...] = setting(str_list, ("huawei.com/Ascend910*", "huawei.com/Ascend310P*",
                                                    "huawei.com/npu"),
                                         "device-plugin resource names whose device IDs name chips (globs; add "
                                         "your plugin's)")


@dataclass(frozen=True)
class Config(ConfigSection):
    """The whole validated config: ``config.collectors.npu_smi.interval`` (built by ``agent.core.config``)."""

    web: WebSection = section(WebSection)
    labels: Mapping[str, str] = derived(optional(labels_map), None,
                                        "constant labels on every series (not `npu`, `chip`, `collector`, `job`, "
                                        "`instance`); `node` defaults to `$NODE_NAME` when that is set",
                                        _labels_with_node)
    expected_chips: int = setting(integer(0, 4096), 0,
                                  "chips this node should have; 0 = unknown (exported as `npuwatch_expected_chips`; "
                                  "NPUChipMissing and the `chip_count` check need it)")
    state_dir: str = setting(string, "/var/lib/npuwatch",
                             "log read positions, counters and the fault history that survive restarts (a change "
                             "takes effect at the next restart)")
    faults: FaultsSection = section(FaultsSection)
    textfile: TextfileSection = section(TextfileSection)
    collectors: CollectorsSection = section(CollectorsSection)
    probes: ProbesSection = section(ProbesSection)
    check: CheckSection = section(CheckSection)
    kubernetes: KubernetesSection = section(KubernetesSection)
    max_series_per_source: int = setting(integer(100, 1_000_000), 20_000,
                                         "one collector run that would export more series is refused as broken "
                                         "output (reason `parse`, nothing exported)")
    log_level: str = setting(choice("debug", "info", "warning", "error"), "info",
                             "`debug`, `info`, `warning`, `error`")
