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
    "web": {
        "enabled": (boolean, True),
        "listen_address": (string, "0.0.0.0"),  # noqa: S104 - an exporter listens for Prometheus
        "port": (integer(1, 65535), DEFAULT_PORT),
        "config_file": (optional(string), None),  # exporter-toolkit style TLS / basic auth file
        "max_connections": (integer(1, 1024), 32),
        "max_connections_per_client": (integer(1, 1024), 4),  # per client IP address
    },
    "labels": (optional(labels_map), None),  # constant labels; `node` defaults from $NODE_NAME
    "expected_chips": (integer(0, 4096), 0),
    "state_dir": (string, "/var/lib/npuwatch"),
    "textfile": {
        "enabled": (boolean, False),
        "directory": (string, "/var/lib/node_exporter/textfile_collector"),
        "interval": (positive_duration, 15.0),
    },
    "collectors": {
        "npu_smi": {
            "enabled": (boolean, True),
            "path": (optional(string), None),
            "interval": (positive_duration, 10.0),
            "usages_interval": (positive_duration, 30.0),
            "health_interval": (positive_duration, 60.0),
            "inventory_interval": (positive_duration, 600.0),
            "timeout": (positive_duration, 10.0),
            "max_parallel": (integer(1, 16), 2),
            "per_process_metrics": (boolean, False),
            "max_chips": (integer(1, 4096), 64),  # a table listing more is refused as broken output
            "disable": (str_list, ()),
            "enable": (str_list, ()),  # opt-in sources, e.g. npu_smi_topo
        },
        "hccn_tool": {
            "enabled": (boolean, True),
            "path": (optional(string), None),
            "interval": (positive_duration, 60.0),
            "timeout": (positive_duration, 10.0),
            "max_parallel": (integer(1, 16), 2),
            "disable": (str_list, ()),
            "hccn_conf": (string, "/etc/hccn.conf"),
        },
        "ascend_dmi": {
            "enabled": (boolean, False),
            "path": (optional(string), None),
            "interval": (positive_duration, 86400.0),
            "timeout": (positive_duration, 900.0),
            "require_idle": (boolean, True),  # false: also run while jobs use the NPUs
        },
        "hccl_logs": {
            "enabled": (boolean, True),
            "interval": (positive_duration, 15.0),
            "paths": (optional(str_list), None),  # default: $ASCEND_PROCESS_LOG_PATH or ~/ascend/log
            "globs": (str_list, ()),
            "kernel_log": (optional(string), None),
            "first_start_window": (duration, 3600.0),
            "byte_budget": (size, 64 << 20),
            "incident_window": (positive_duration, 3600.0),  # how long incident series stay exported
        },
        "host": {
            "enabled": (boolean, True),
            "interval": (positive_duration, 15.0),
            "mountpoints": (str_list, ("/",)),
        },
    },
    "probes": {
        "enabled": (boolean, True),
        "python": (optional(string), None),
        "backend": (choice("auto", "npu", "cuda", "cpu"), "auto"),
        "model": (optional(string), None),
        "lock_file": (string, "/run/npuwatch/probe.lock"),
        "idle_aicore_threshold": (ratio, 0.05),
        "connect_timeout": (positive_duration, 120.0),
        "exec_timeout": (positive_duration, 120.0),
        "deadline": (positive_duration, 600.0),
        "stall": (optional(positive_duration), None),  # no progress this long in connect/exec
        "peaks": (optional(peaks_table), None),
        "gemm": {
            "enabled": (boolean, True),
            "interval": (positive_duration, 3600.0),
            "cron": (optional(cron_expression), None),
            "jitter": (duration, 300.0),
            "first_run": (optional(duration), None),  # after start; default: at random within jitter
            "size": (optional(integer(16, 65536)), None),
            "dtypes": (optional(str_list), None),
            "min_efficiency": (ratio, 0.8),
        },
        "allreduce": {
            "enabled": (boolean, True),
            "interval": (positive_duration, 6 * 3600.0),
            "cron": (optional(cron_expression), None),
            "jitter": (duration, 900.0),
            "first_run": (optional(duration), None),
            "size": (optional(size), None),
            "devices": (optional(int_list), None),
            "min_bus_bandwidth": (optional(positive_float), None),  # bytes/s
        },
    },
    "check": {
        # `npuwatch check` and the agent's scheduled levels (agent/check/)
        "tool_timeout": (positive_duration, 4.0),  # per tool call, at most the collector's own timeout
        "max_parallel": (integer(1, 16), 4),  # npu-smi calls at once during a check (at least the collectors')
        "flap_window": (optional(positive_duration), None),  # roce_flaps look-back; None: the thresholds table's
        "hccl_window": (positive_duration, 3600.0),  # hccl_errors: log errors this recent warn
        "max_isolated_pages": (optional(integer(0)), None),  # hbm_ecc: more fail; None: the thresholds table's
        "expected_driver": (optional(string), None),  # versions: the fleet's driver, when set
        "expected_firmware": (optional(string), None),  # versions: the fleet's firmware, when set
        "skip": (str_list, ()),  # check names this node never runs (e.g. [hccs, roce_ip])
        "references": (optional(_references_table), None),  # {MODEL: {measure: value}}, base units
        "fail_ratio": (ratio, 0.8),  # of a reference figure; below fails
        "warn_ratio": (ratio, 0.9),
        "baseline_file": (optional(string), None),  # fleet medians (JSON); --baseline wins
        "prometheus_url": (optional(string), None),  # fleet medians from Prometheus; --prometheus wins
        "fleet_fail_ratio": (ratio, 0.85),  # of the fleet median; below fails
        "fleet_warn_ratio": (ratio, 0.92),
        "fleet_min_nodes": (integer(1), 5),  # a median over fewer nodes is not used
        "max_temperature": (positive_float, 95.0),  # sustained_gemm: chip degrees C that fail
        "sustained_duration": (optional(positive_duration), None),  # sustained_gemm: seconds (worker default)
        "max_throttle_drop": (ratio, 0.15),  # sustained_gemm: slowest window this far below the best fails
        "warn_throttle_drop": (ratio, 0.05),  # ... and this far warns
        "min_peer_ratio": (ratio, 0.75),  # bandwidth checks: a cell below this share of its run's median fails
        "copy_size": (optional(size), None),  # bandwidth checks' buffer (default: the worker's)
        "schedule": {
            "quick": {
                "enabled": (boolean, False),
                "interval": (positive_duration, 300.0),
                "cron": (optional(cron_expression), None),
                "first_run": (duration, 60.0),  # after the agent starts (interval schedules)
            },
            "medium": {
                "enabled": (boolean, False),
                "interval": (positive_duration, 86400.0),
                "cron": (optional(cron_expression), None),
                "first_run": (duration, 600.0),
            },
            "long": {
                "enabled": (boolean, False),
                "interval": (positive_duration, 7 * 86400.0),
                "cron": (optional(cron_expression), None),
                "first_run": (duration, 1800.0),
            },
        },
    },
    "kubernetes": {
        # auto: on when the agent runs in a Kubernetes pod (KUBERNETES_SERVICE_HOST is set)
        "pod_attribution": (_auto_or_boolean, "auto"),
        "pod_resources_socket": (string, "/var/lib/kubelet/pod-resources/kubelet.sock"),
        "interval": (positive_duration, 15.0),
        "timeout": (positive_duration, 5.0),  # per kubelet call
        # device-plugin resource names whose devices are chips (globs)
        "resources": (str_list, ("huawei.com/Ascend910*", "huawei.com/Ascend310P*", "huawei.com/npu")),
    },
    "max_series_per_source": (integer(100, 1_000_000), 20_000),  # more from one run: refused as broken output
    "log_level": (choice("debug", "info", "warning", "error"), "info"),
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
        check, default = entry
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
