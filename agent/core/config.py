"""Configuration: one YAML file, every setting defaulted, validated up front.

``load_config(path)`` returns a ``Config``; any problem (unknown key, wrong type,
bad duration) raises ``ConfigError`` listing every problem with its path, e.g.
``collectors.npu_smi.interval: expected a duration like 10s, got "fast"``.
"""

from __future__ import annotations

import difflib
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from agent.core.config_values import (
    ConfigError,
    boolean,
    choice,
    clip,
    cron_expression,
    duration,
    format_duration,
    int_list,
    integer,
    labels_map,
    optional,
    parse_duration,
    parse_size,
    peaks_table,
    positive_duration,
    positive_float,
    ratio,
    read_yaml_file,
    show,
    size,
    str_list,
    string,
)
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
    "Config",
    "ConfigError",
    "apply_overrides",
    "build_config",
    "default_config",
    "format_duration",
    "load_config",
    "parse_duration",
    "parse_size",
    "read_yaml_file",
]

DEFAULT_PORT = 9611



def _auto_or_boolean(value: Any) -> bool | str:
    if isinstance(value, bool) or value == "auto":
        return value
    raise TypeError(f"expected true, false or auto, got {show(value)}")


def _default_log_paths() -> tuple[str, ...]:
    base = os.environ.get("ASCEND_PROCESS_LOG_PATH") or str(Path("~/ascend/log").expanduser())
    return (base,)


Schema = Mapping[str, Any]


def _references_table(value: Any) -> dict[str, dict[str, float]]:
    """``{model: {measure: value}}`` in base units, e.g. ``{"910B3": {"hbm_bandwidth": 1.5e12}}``."""
    if not isinstance(value, dict):
        raise TypeError(f"expected a mapping of model to {{measure: value}}, got {show(value)}")
    result: dict[str, dict[str, float]] = {}
    for model, measures in value.items():
        if not isinstance(measures, dict) or not all(
            isinstance(v, (int, float)) and not isinstance(v, bool) and v > 0 for v in measures.values()
        ):
            raise TypeError(f"{model}: expected {{measure: positive value}}, got {show(measures)}")
        result[str(model)] = {str(k): float(v) for k, v in measures.items()}
    return result

SCHEMA: Schema = {
    # Each setting: (checker, default, one-line description for docs/configuration.md).
    "web": {
        "enabled": (boolean, True, "serve HTTP; `false` with `textfile.enabled` serves only through the textfile"),
        "listen_address": (string, "0.0.0.0",  # noqa: S104 - an exporter listens for Prometheus
                           "address `/metrics`, `/healthz` and `/readyz` listen on"),
        "port": (integer(1, 65535), DEFAULT_PORT, "port they listen on (1-65535)"),
        "config_file": (optional(string), None,
                        "TLS and basic auth, in the exporter-toolkit web config format; reloaded when it (or a "
                        "certificate it names) changes, and on SIGHUP"),
        "max_connections": (integer(1, 1024), 32,
                            "open HTTP connections; when full, a new one closes the longest-idle connection of "
                            "the address that holds the most"),
        "max_connections_per_client": (integer(1, 1024), 4,
                                       "per client IP address: idle connections (a new one closes the address's "
                                       "longest-idle one) and requests in progress (a further one waits up to 1 s "
                                       "for a turn)"),
    },
    "labels": (optional(labels_map), None,
               "constant labels on every series (not `npu`, `chip`, `collector`, `job`, `instance`); `node` "
               "defaults to `$NODE_NAME` when that is set"),
    "expected_chips": (integer(0, 4096), 0,
                       "chips this node should have; 0 = unknown (exported as `npuwatch_expected_chips`; "
                       "NPUChipMissing and the `chip_count` check need it)"),
    "state_dir": (string, "/var/lib/npuwatch", "log read positions, counters and the fault history that survive "
                                               "restarts (a change takes effect at the next restart)"),
    "faults": {
        "codes_file": (optional(string), None,
                       "a newer `faultCode.json` (the Ascend device plugin's format: `<Level>Codes` lists) for the "
                       "`handling` levels of error codes; none: the packaged table (docs/fault-codes.md)"),
        "escalation_file": (optional(string), None,
                            "a newer `faultCustomization.json` (`FaultFrequency`, `FaultDuration`) for escalation; "
                            "none: the packaged rules"),
    },
    "textfile": {
        "enabled": (boolean, False,
                    "write `npuwatch.prom` atomically for node_exporter's textfile collector"),
        "directory": (string, "/var/lib/node_exporter/textfile_collector", "where `npuwatch.prom` is written"),
        "interval": (positive_duration, 15.0, "how often it is written"),
    },
    "collectors": {
        "npu_smi": {
            "enabled": (boolean, True, "the npu-smi collectors"),
            "path": (optional(string), None,
                     "npu-smi; none: on PATH, else `/usr/local/sbin`, `/usr/local/Ascend/driver/tools`, ..."),
            "interval": (positive_duration, 10.0, "the `npu-smi info` table"),
            "usages_interval": (positive_duration, 30.0, "`-t usages`, `-t common`"),
            "health_interval": (positive_duration, 60.0, "`-t ecc`, `health`, `memory`, `board`, `hccs`, `hccs-bw`"),
            "inventory_interval": (positive_duration, 600.0, "`-m`, `-t topo` (also run at start)"),
            "timeout": (positive_duration, 10.0, "per call; the process group is killed after it"),
            "max_parallel": (integer(1, 16), 2, "npu-smi processes at once (per-chip calls share this pool)"),
            "per_process_metrics": (boolean, False, "export `npu_process_memory_bytes` (one series per pid)"),
            "max_chips": (integer(1, 4096), 64,
                          "a table listing more chips is refused as broken output (`npu_smi_info` up 0, "
                          "reason `parse`)"),
            "disable": (str_list, (), "source names to skip, e.g. `[npu_smi_hccs_bw]` on boards without HCCS"),
            "enable": (str_list, (), "opt-in sources: `npu_smi_topo` (`npu_topology_link`)"),
        },
        "dcmi": {
            "enabled": (_auto_or_boolean, "auto",
                        "read chips through the driver's library `libdcmi.so` (docs/dcmi.md): `auto` uses it "
                        "when found and vetted, with npu-smi as fallback per reading; `true` the same, warning when "
                        "none is found; `false` never; read at start"),
            "library": (optional(string), None,
                        "path of `libdcmi.so`, used as given (a warning when not root-owned or writable by "
                        "others); none: `LD_LIBRARY_PATH`, `ldconfig -p`, `/usr/local/dcmi`, "
                        "`/usr/local/Ascend/driver/lib64/driver`"),
            "call_timeout": (positive_duration, 5.0,
                             "deadline of each DCMI call; the worker process is killed and restarted after it"),
            "npu_smi_interval": (positive_duration, 240.0,
                                 "with DCMI in use, the npu-smi sources it does not serve (`-t board`, `hccs`, "
                                 "`hccs-bw`) run this often instead of `health_interval`: 3 calls per chip every "
                                 "4 minutes keep npu-smi under one process per chip per minute"),
            "verify_interval": (positive_duration, 21600.0,
                                "how often one chip is read through both DCMI and npu-smi and the shared fields "
                                "compared (also at start); a field that disagrees gives its collector back to "
                                "npu-smi"),
            "lock_file": (string, "/run/npuwatch/dcmi.lock",
                          "one npuwatch process on the node calls DCMI at a time: every process that uses DCMI "
                          "takes this lock"),
        },
        "hccn_tool": {
            "enabled": (boolean, True, "the RoCE collectors (no hccn_tool = no data, not an error)"),
            "path": (optional(string), None, "hccn_tool; none: on PATH, else the standard Ascend locations"),
            "interval": (positive_duration, 60.0, "every hccn_tool source (`-link`, `-link_stat`, `-net_health`, "
                         "`-optical`, `-stat`, `-speed`, `-ip`)"),
            "timeout": (positive_duration, 10.0, "per call; the process group is killed after it"),
            "max_parallel": (integer(1, 16), 2,
                             "hccn_tool processes at once (a pool of its own, so a slow RoCE pass never "
                             "delays npu-smi)"),
            "disable": (str_list, (), "source names to skip"),
            "hccn_conf": (string, "/etc/hccn.conf",
                          "expected device IPs (`diagnose`, `check`'s `roce_ip`; `bundle` copies it)"),
        },
        "ascend_dmi": {
            "enabled": (boolean, False, "ascend-dmi `-f` / `--bw`: slow and intrusive"),
            "path": (optional(string), None, "ascend-dmi; none: on PATH, else the standard Ascend locations"),
            "interval": (positive_duration, 86400.0, "how often it runs"),
            "timeout": (positive_duration, 900.0, "per call"),
            "require_idle": (boolean, True,
                             "run ascend-dmi only when no NPU process runs and AI Cores are idle (false: also "
                             "while jobs use the NPUs)"),
        },
        "hccl_logs": {
            "enabled": (boolean, True, "the CANN/HCCL log scanner"),
            "interval": (positive_duration, 15.0, "scan cadence"),
            "paths": (optional(str_list), None,
                      "CANN log roots (`debug/plog`, `run/plog`, `debug/device-*`); none: "
                      "`$ASCEND_PROCESS_LOG_PATH`, else `~/ascend/log`"),
            "globs": (str_list, (),
                      "extra job-log globs (`*`, `?`, `[..]`, `**`; under `**` symlinked directories are not "
                      "followed and no directory is entered twice; a walk stops after 200,000 directory "
                      "entries and says so)"),
            "kernel_log": (optional(string), None, "a kernel log file to scan for `Heartbeat lost!`"),
            "first_start_window": (duration, 3600.0, "on first start only files modified within this are read"),
            "byte_budget": (size, 64 << 20, "bytes read per cycle, so a 10 GB log cannot stall the agent"),
            "incident_window": (positive_duration, 3600.0,
                                "how long a rank's timeout and the peers its logs blame stay exported "
                                "(`npu_hccl_rank_timeout_timestamp_seconds`, "
                                "`npu_hccl_peer_blamed_timestamp_seconds`); the window of HCCLCulpritSuspected"),
        },
        "host": {
            "enabled": (boolean, True, "psutil host metrics (`npuwatch_host_*`)"),
            "interval": (positive_duration, 15.0, "how often they are read"),
            "mountpoints": (str_list, ("/",), "file systems of `npuwatch_host_disk_*`"),
        },
    },
    "probes": {
        "enabled": (boolean, True, "GEMM and all-reduce probes in the agent"),
        "python": (optional(string), None,
                   "interpreter with torch (and torch_npu on NPU nodes); none: the agent's interpreter"),
        "backend": (choice("auto", "npu", "cuda", "cpu"), "auto",
                    "`auto`, `npu`, `cuda`, `cpu`; `auto` picks the first that works"),
        "model": (optional(string), None, "chip model for the expected-peak table; none: from npu-smi"),
        "lock_file": (string, "/run/npuwatch/probe.lock", "shared with manual `npuwatch probe` runs"),
        "idle_aicore_threshold": (ratio, 0.05,
                                  "probes run only below this AI Core utilization and with no NPU process"),
        "connect_timeout": (positive_duration, 120.0,
                            "`HCCL_CONNECT_TIMEOUT` (clamped to what HCCL accepts: 120 s minimum)"),
        "exec_timeout": (positive_duration, 120.0,
                         "`HCCL_EXEC_TIMEOUT` (clamped to what HCCL accepts: 68 s minimum)"),
        "deadline": (positive_duration, 600.0, "the outer watchdog: the worker's process group is killed then"),
        "stall": (optional(positive_duration), None,
                  "kill a probe that makes no progress this long in connect or exec"),
        "peaks": (optional(peaks_table), None,
                  "`{model: {dtype: FLOP/s}}` overrides and additions to the built-in peak table"),
        "gemm": {
            "enabled": (boolean, True, "the GEMM probe"),
            "interval": (positive_duration, 3600.0, "how often it runs"),
            "cron": (optional(cron_expression), None, "a crontab schedule instead of `interval`"),
            "jitter": (duration, 300.0, "up to this much is added to each run's time"),
            "first_run": (optional(duration), None,
                          "the first run this long after start; none: at random within `jitter`"),
            "size": (optional(integer(16, 65536)), None,
                     "matrix size; none: the backend's default (8192 on npu/cuda, 1024 on cpu)"),
            "dtypes": (optional(str_list), None,
                       "dtypes; none: the backend's default (fp16 and bf16 on npu/cuda, fp32 on cpu)"),
            "min_efficiency": (ratio, REFERENCE_FAIL.value, "pass threshold: FLOP/s over the model's expected peak"),
        },
        "allreduce": {
            "enabled": (boolean, True, "the node all-reduce probe"),
            "interval": (positive_duration, 6 * 3600.0, "how often it runs"),
            "cron": (optional(cron_expression), None, "a crontab schedule instead of `interval`"),
            "jitter": (duration, 900.0, "up to this much is added to each run's time"),
            "first_run": (optional(duration), None,
                          "the first run this long after start; none: at random within `jitter`"),
            "size": (optional(size), None, "message size; none: the backend's default (256 MiB on npu/cuda)"),
            "devices": (optional(int_list), None, "devices taking part; none: all"),
            "min_bus_bandwidth": (optional(positive_float), None, "pass threshold in bytes/s; none: no threshold"),
        },
    },
    "check": {
        # `npuwatch check` and the agent's scheduled levels (agent/check/)
        "tool_timeout": (positive_duration, 4.0,
                         "each npu-smi/hccn_tool call of `npuwatch check`, at most the collector's own timeout "
                         "(the quick level must answer in 10 s)"),
        "max_parallel": (integer(1, 16), 4,
                         "npu-smi calls at once during a check (at least `collectors.npu_smi.max_parallel`)"),
        "flap_window": (optional(positive_duration), None,
                        "`roce_flaps` look-back (two link-down events in it fail, one warns); none: the "
                        "thresholds table's (15 min)"),
        "hccl_window": (optional(positive_duration), None,
                        "`hccl_errors` look-back of check and diagnose (`--window` wins): HCCL/CANN log errors this "
                        "recent warn; none: the thresholds table's incident look-back (2 h)"),
        "max_isolated_pages": (optional(integer(0)), None,
                               "`hbm_ecc` fails above this many isolated HBM pages (warns above 0); none: the "
                               "thresholds table's"),
        "expected_driver": (optional(string), None, "`versions` also fails a card on another driver version"),
        "expected_firmware": (optional(string), None, "`versions` also fails a card on another firmware version"),
        "skip": (str_list, (),
                 "checks this node never runs, e.g. `[hccs, roce_ip]` (`dmi_diag_<item>` for one ascend-dmi item)"),
        "references": (optional(_references_table), None,
                       "`{model: {measure: value}}` in base units, e.g. `{910B3: {hbm_bandwidth: 1.5e12}}`; wins "
                       "over the built-in figures"),
        "fail_ratio": (ratio, REFERENCE_FAIL.value, "a measurement below this share of its reference figure fails"),
        "warn_ratio": (ratio, REFERENCE_WARN.value, "a measurement below this share of its reference figure warns"),
        "baseline_file": (optional(string), None, "fleet medians (JSON); `--baseline` wins"),
        "prometheus_url": (optional(string), None, "fleet medians from Prometheus; `--prometheus` wins"),
        "fleet_fail_ratio": (ratio, FLEET_FAIL.value, "a measurement below this share of the fleet median fails"),
        "fleet_warn_ratio": (ratio, FLEET_WARN.value, "a measurement below this share of the fleet median warns"),
        "fleet_min_nodes": (integer(1), FLEET_MIN_NODES, "a fleet median over fewer nodes is not used"),
        "max_temperature": (optional(positive_float), None,
                            "`temperature` and `sustained_gemm` fail a chip hotter than this (°C); none: the "
                            "thresholds table's `chip_too_hot` (95)"),
        "sustained_duration": (optional(positive_duration), None,
                               "`sustained_gemm`: time under load; none: the worker's default (npu/cuda 3m, cpu "
                               "10s; cut to fit the long level's 15 min)"),
        "max_throttle_drop": (ratio, THROTTLE_FAIL.value,
                              "`sustained_gemm` fails a chip whose slowest window falls this far below its best"),
        "warn_throttle_drop": (ratio, THROTTLE_WARN.value,
                               "`sustained_gemm` warns a chip whose slowest window falls this far below its best"),
        "min_peer_ratio": (ratio, PEER_FAIL.value,
                           "bandwidth checks: a chip (or pair) below this share of the median of its kind in the "
                           "same run fails, so one slow link of 56 is found without a reference"),
        "copy_size": (optional(size), None, "buffer of the bandwidth checks; none: the worker's default"),
        "schedule": {
            "quick": {
                "enabled": (boolean, False, "the agent runs the quick level and exports `npu_check_*`"),
                "interval": (positive_duration, 300.0, "how often"),
                "cron": (optional(cron_expression), None, "a crontab schedule instead of `interval`"),
                "first_run": (duration, 60.0, "the first run this long after the agent starts (interval schedules)"),
            },
            "medium": {
                "enabled": (boolean, False,
                            "the agent runs the medium level when the NPUs are idle (busy: tried again 10 min "
                            "later)"),
                "interval": (positive_duration, 86400.0, "how often"),
                "cron": (optional(cron_expression), None, "a crontab schedule instead of `interval`"),
                "first_run": (duration, 600.0, "the first run this long after the agent starts (interval schedules)"),
            },
            "long": {
                "enabled": (boolean, False,
                            "the agent runs the long level when the NPUs are idle (busy: tried again 10 min "
                            "later)"),
                "interval": (positive_duration, 7 * 86400.0, "how often"),
                "cron": (optional(cron_expression), None, "a crontab schedule instead of `interval`"),
                "first_run": (duration, 1800.0, "the first run this long after the agent starts (interval schedules)"),
            },
        },
    },
    "kubernetes": {
        "pod_attribution": (_auto_or_boolean, "auto",
                            "`npu_pod_info` from the kubelet's pod-resources API: `true`, `false`, or `auto` (on "
                            "when the agent runs in a Kubernetes pod, i.e. `KUBERNETES_SERVICE_HOST` is set); "
                            "needs the `k8s` extra (grpcio, protobuf)"),
        "pod_resources_socket": (string, "/var/lib/kubelet/pod-resources/kubelet.sock",
                                 "the kubelet's socket (missing = no data, not an error)"),
        "interval": (positive_duration, 15.0, "how often the kubelet is asked"),
        "timeout": (positive_duration, 5.0, "the deadline of each kubelet call"),
        "resources": (str_list, ("huawei.com/Ascend910*", "huawei.com/Ascend310P*", "huawei.com/npu"),
                      "device-plugin resource names whose device IDs name chips (globs; add your plugin's)"),
    },
    "max_series_per_source": (integer(100, 1_000_000), 20_000,
                              "one collector run that would export more series is refused as broken output "
                              "(reason `parse`, nothing exported)"),
    "log_level": (choice("debug", "info", "warning", "error"), "info", "`debug`, `info`, `warning`, `error`"),
}


class Config:
    """Validated settings as nested read-only attribute access: ``cfg.collectors.npu_smi.interval``."""

    def __init__(self, values: Mapping[str, Any], path: str = "") -> None:
        self._values = dict(values)
        self._path = path

    def __getattr__(self, name: str) -> Any:
        try:
            value = self._values[name]
        except KeyError:
            raise AttributeError(f"{self._path + '.' if self._path else ''}{name}") from None
        return value

    def get(self, dotted: str) -> Any:
        node: Any = self
        for part in dotted.split("."):
            node = getattr(node, part)
        return node

    def to_dict(self) -> dict[str, Any]:
        return {k: v.to_dict() if isinstance(v, Config) else v for k, v in self._values.items()}

    def __repr__(self) -> str:
        return f"Config({self.to_dict()!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Config) and self.to_dict() == other.to_dict()

    __hash__ = None  # type: ignore[assignment]


def _validate(schema: Schema, raw: Any, path: str, problems: list[str]) -> Config:
    if raw is None:
        raw = {}
    if not isinstance(raw, dict):
        problems.append(f"{path or 'config'}: expected a mapping of settings, got {show(raw)}")
        raw = {}
    values: dict[str, Any] = {}
    for key in raw:
        if key not in schema:
            where = clip(f"{path}.{key}" if path else str(key), 80)
            known = ", ".join(sorted(schema))
            problems.append(f"{where}: unknown setting (known here: {known})")
    for key, entry in schema.items():
        where = f"{path}.{key}" if path else key
        if isinstance(entry, Mapping):
            values[key] = _validate(entry, raw.get(key), where, problems)
            continue
        check, default = entry[0], entry[1]
        if key not in raw:
            values[key] = default
            continue
        try:
            values[key] = check(raw[key])
        except TypeError as exc:
            problems.append(f"{where}: {exc}")
            values[key] = default
    return Config(values, path)


def _apply_derived_defaults(values: dict[str, Any]) -> None:
    labels = dict(values.get("labels") or {})
    node_name = os.environ.get("NODE_NAME")
    if "node" not in labels and node_name:
        labels["node"] = node_name
    values["labels"] = labels


def _check_source_names(config: Config, problems: list[str]) -> None:
    """Names in ``disable``/``enable`` must be sources of that tool; the nearest valid name is suggested."""
    from collectors.sources import SOURCES

    by_tool: dict[str, list[Any]] = {}
    for source in SOURCES:
        by_tool.setdefault(source.tool, []).append(source)
    lists = (
        ("collectors.npu_smi.disable", config.collectors.npu_smi.disable, [s.name for s in by_tool["npu-smi"]]),
        ("collectors.npu_smi.enable", config.collectors.npu_smi.enable,
         [s.name for s in by_tool["npu-smi"] if not s.default_enabled]),
        ("collectors.hccn_tool.disable", config.collectors.hccn_tool.disable, [s.name for s in by_tool["hccn_tool"]]),
    )
    for where, names, valid in lists:
        for name in names:
            if name in valid:
                continue
            near = difflib.get_close_matches(name, valid, n=1)
            hint = f"; did you mean {near[0]}?" if near else ""
            problems.append(f"{where}: {show(name)} is not one of {', '.join(sorted(valid))}{hint}")


def build_config(raw: Any, source: str = "config") -> Config:
    problems: list[str] = []
    config = _validate(SCHEMA, raw, "", problems)
    _check_source_names(config, problems)
    if problems:
        raise ConfigError(problems, source)
    values = config.to_dict()
    _apply_derived_defaults(values)
    logs = values["collectors"]["hccl_logs"]
    if logs["paths"] is None:
        logs["paths"] = _default_log_paths()
    return _rebuild(values, "")


def _rebuild(values: Mapping[str, Any], path: str) -> Config:
    return Config(
        {k: _rebuild(v, f"{path}.{k}" if path else k) if isinstance(v, dict) and k not in
         ("labels", "peaks", "references") else v for k, v in values.items()},
        path,
    )


def default_config() -> Config:
    return build_config({})


def load_config(path: str | os.PathLike[str] | None) -> Config:
    """Read and validate ``path``; no path means all defaults."""
    if path is None:
        return default_config()
    return build_config(read_yaml_file(path), str(path))


def apply_overrides(config: Config, overrides: dict[str, Any]) -> Config:
    """A new validated Config with dotted keys replaced (``collectors.npu_smi.path``)."""
    values = config.to_dict()
    for dotted, value in overrides.items():
        node = values
        *parents, leaf = dotted.split(".")
        for part in parents:
            node = node[part]
        node[leaf] = value
    return build_config(_serialisable(values))


def _serialisable(values: Any) -> Any:
    if isinstance(values, dict):
        return {k: _serialisable(v) for k, v in values.items()}
    if isinstance(values, tuple):
        return list(values)
    return values
