"""Configuration: one YAML file, every setting defaulted, validated up front.

``load_config(path)`` returns a ``Config``; any problem (unknown key, wrong type,
bad duration) raises ``ConfigError`` listing every problem with its path, e.g.
``collectors.npu_smi.interval: expected a duration like 10s, got "fast"``.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import yaml

__all__ = [
    "DEFAULT_PORT",
    "Config",
    "ConfigError",
    "build_config",
    "default_config",
    "format_duration",
    "load_config",
    "parse_duration",
    "parse_size",
    "read_yaml_file",
]

DEFAULT_PORT = 9611

_DURATION_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h|d)?\s*$")
_DURATION_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0, None: 1.0}
_SIZE_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(B|KiB|MiB|GiB|KB|MB|GB)?\s*$")
_SIZE_UNITS = {None: 1, "B": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30,
               "KB": 1000, "MB": 1000**2, "GB": 1000**3}
_LABEL_NAME_RE = re.compile(r"^[a-zA-Z_][a-zA-Z0-9_]*$")
_RESERVED_LABELS = frozenset({"npu", "chip", "collector", "job", "instance"})


class ConfigError(Exception):
    """Every problem found in a configuration, each prefixed with its key path."""

    def __init__(self, problems: list[str], source: str = "config") -> None:
        self.problems = problems
        self.source = source
        super().__init__(f"invalid {source}:\n" + "\n".join(f"  - {p}" for p in problems))


def parse_duration(value: Any) -> float:
    """``10s``, ``5m``, ``1.5h``, ``250ms`` or a bare number of seconds -> seconds."""
    if isinstance(value, bool):
        raise ValueError(value)
    if isinstance(value, int | float):
        if value < 0:
            raise ValueError(value)
        return float(value)
    if isinstance(value, str):
        match = _DURATION_RE.match(value)
        if match:
            return float(match.group(1)) * _DURATION_UNITS[match.group(2)]
    raise ValueError(value)


def format_duration(seconds: float) -> str:
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size and seconds % size == 0:
            return f"{int(seconds // size)}{unit}"
    return f"{seconds:g}s"


def parse_size(value: Any) -> int:
    """``64MiB``, ``1GiB``, ``4096`` -> bytes."""
    if isinstance(value, bool):
        raise ValueError(value)
    if isinstance(value, int) and value >= 0:
        return value
    if isinstance(value, str):
        match = _SIZE_RE.match(value)
        if match:
            return int(float(match.group(1)) * _SIZE_UNITS[match.group(2)])
    raise ValueError(value)


# --- schema: each leaf is (checker, default); a checker returns the typed value or raises
Checker = Callable[[Any], Any]


def _duration(value: Any) -> float:
    try:
        return parse_duration(value)
    except ValueError:
        raise TypeError(f"expected a duration like 10s, got {_show(value)}") from None


def _positive_duration(value: Any) -> float:
    seconds = _duration(value)
    if seconds <= 0:
        raise TypeError(f"expected a duration above zero like 10s, got {_show(value)}")
    return seconds


def _size(value: Any) -> int:
    try:
        return parse_size(value)
    except ValueError:
        raise TypeError(f"expected a size like 64MiB, got {_show(value)}") from None


def _bool(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    raise TypeError(f"expected true or false, got {_show(value)}")


def _int(minimum: int, maximum: int | None = None) -> Checker:
    def check(value: Any) -> int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise TypeError(f"expected an integer, got {_show(value)}")
        if value < minimum or (maximum is not None and value > maximum):
            upper = f" and {maximum}" if maximum is not None else ""
            raise TypeError(f"expected an integer between {minimum}{upper}, got {value}")
        return value

    return check


def _ratio(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value <= 1:
        raise TypeError(f"expected a ratio between 0 and 1, got {_show(value)}")
    return float(value)


def _positive_float(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
        raise TypeError(f"expected a positive number, got {_show(value)}")
    return float(value)


def _str(value: Any) -> str:
    if isinstance(value, str):
        return value
    raise TypeError(f"expected a string, got {_show(value)}")


def _optional(check: Checker) -> Checker:
    def optional(value: Any) -> Any:
        return None if value is None else check(value)

    return optional


def _choice(*options: str) -> Checker:
    def check(value: Any) -> str:
        if value in options:
            return str(value)
        raise TypeError(f"expected one of {', '.join(options)}, got {_show(value)}")

    return check


def _str_list(value: Any) -> tuple[str, ...]:
    if isinstance(value, list) and all(isinstance(item, str) for item in value):
        return tuple(value)
    raise TypeError(f"expected a list of strings, got {_show(value)}")


def _int_list(value: Any) -> tuple[int, ...]:
    if isinstance(value, list) and all(isinstance(i, int) and not isinstance(i, bool) for i in value):
        return tuple(value)
    raise TypeError(f"expected a list of integers, got {_show(value)}")


def _labels(value: Any) -> dict[str, str]:
    if not isinstance(value, dict):
        raise TypeError(f"expected a mapping of label names to values, got {_show(value)}")
    result: dict[str, str] = {}
    for key, item in value.items():
        if not isinstance(key, str) or not _LABEL_NAME_RE.match(key) or key.startswith("__"):
            raise TypeError(f"invalid label name {_show(key)}")
        if key in _RESERVED_LABELS:
            raise TypeError(f"label name {key!r} is used by npuwatch's own series")
        if not isinstance(item, str | int | float) or isinstance(item, bool):
            raise TypeError(f"label {key!r}: expected a string value, got {_show(item)}")
        result[key] = str(item)
    return result


def _peaks(value: Any) -> dict[str, dict[str, float]]:
    """``{model: {dtype: FLOP/s}}``, e.g. ``{"910B3": {"fp16": 313.7e12}}``."""
    if not isinstance(value, dict):
        raise TypeError(f"expected a mapping of model to {{dtype: flops}}, got {_show(value)}")
    result: dict[str, dict[str, float]] = {}
    for model, per_dtype in value.items():
        if not isinstance(per_dtype, dict) or not all(
            isinstance(v, int | float) and not isinstance(v, bool) and v > 0 for v in per_dtype.values()
        ):
            raise TypeError(f"{model}: expected {{dtype: positive FLOP/s}}, got {_show(per_dtype)}")
        result[str(model)] = {str(k): float(v) for k, v in per_dtype.items()}
    return result


def _show(value: Any) -> str:
    if isinstance(value, str):
        return f'"{value}"'
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _default_log_paths() -> tuple[str, ...]:
    base = os.environ.get("ASCEND_PROCESS_LOG_PATH") or str(Path("~/ascend/log").expanduser())
    return (base,)


Schema = Mapping[str, Any]

SCHEMA: Schema = {
    "web": {
        "enabled": (_bool, True),
        "listen_address": (_str, "0.0.0.0"),  # noqa: S104 - an exporter listens for Prometheus
        "port": (_int(0, 65535), DEFAULT_PORT),
        "config_file": (_optional(_str), None),  # exporter-toolkit style TLS / basic auth file
        "max_connections": (_int(1, 1024), 32),
    },
    "labels": (_optional(_labels), None),  # constant labels; `node` defaults from $NODE_NAME
    "expected_chips": (_int(0, 4096), 0),
    "state_dir": (_str, "/var/lib/npuwatch"),
    "textfile": {
        "enabled": (_bool, False),
        "directory": (_str, "/var/lib/node_exporter/textfile_collector"),
        "interval": (_positive_duration, 15.0),
    },
    "collectors": {
        "npu_smi": {
            "enabled": (_bool, True),
            "path": (_optional(_str), None),
            "interval": (_positive_duration, 10.0),
            "usages_interval": (_positive_duration, 30.0),
            "health_interval": (_positive_duration, 60.0),
            "inventory_interval": (_positive_duration, 600.0),
            "timeout": (_positive_duration, 10.0),
            "max_parallel": (_int(1, 16), 2),
            "per_process_metrics": (_bool, False),
            "disable": (_str_list, ()),
            "enable": (_str_list, ()),  # opt-in sources, e.g. npu_smi_topo
        },
        "hccn_tool": {
            "enabled": (_bool, True),
            "path": (_optional(_str), None),
            "interval": (_positive_duration, 60.0),
            "timeout": (_positive_duration, 10.0),
            "max_parallel": (_int(1, 16), 2),
            "disable": (_str_list, ()),
            "hccn_conf": (_str, "/etc/hccn.conf"),
        },
        "ascend_dmi": {
            "enabled": (_bool, False),
            "path": (_optional(_str), None),
            "interval": (_positive_duration, 86400.0),
            "timeout": (_positive_duration, 900.0),
            "require_idle": (_bool, True),  # false: also run while jobs use the NPUs
        },
        "hccl_logs": {
            "enabled": (_bool, True),
            "interval": (_positive_duration, 15.0),
            "paths": (_optional(_str_list), None),  # default: $ASCEND_PROCESS_LOG_PATH or ~/ascend/log
            "globs": (_str_list, ()),
            "kernel_log": (_optional(_str), None),
            "first_start_window": (_duration, 3600.0),
            "byte_budget": (_size, 64 << 20),
        },
        "host": {
            "enabled": (_bool, True),
            "interval": (_positive_duration, 15.0),
            "mountpoints": (_str_list, ("/",)),
        },
    },
    "probes": {
        "enabled": (_bool, True),
        "python": (_optional(_str), None),
        "backend": (_choice("auto", "npu", "cuda", "cpu"), "auto"),
        "model": (_optional(_str), None),
        "lock_file": (_str, "/run/npuwatch/probe.lock"),
        "idle_aicore_threshold": (_ratio, 0.05),
        "connect_timeout": (_positive_duration, 120.0),
        "exec_timeout": (_positive_duration, 120.0),
        "deadline": (_positive_duration, 600.0),
        "stall": (_optional(_positive_duration), None),  # no progress this long in connect/exec
        "peaks": (_optional(_peaks), None),
        "gemm": {
            "enabled": (_bool, True),
            "interval": (_positive_duration, 3600.0),
            "cron": (_optional(_str), None),
            "jitter": (_duration, 300.0),
            "size": (_optional(_int(16, 65536)), None),
            "dtypes": (_optional(_str_list), None),
            "min_efficiency": (_ratio, 0.8),
        },
        "allreduce": {
            "enabled": (_bool, True),
            "interval": (_positive_duration, 6 * 3600.0),
            "cron": (_optional(_str), None),
            "jitter": (_duration, 900.0),
            "size": (_optional(_size), None),
            "devices": (_optional(_int_list), None),
            "min_bus_bandwidth": (_optional(_positive_float), None),  # bytes/s
        },
    },
    "log_level": (_choice("debug", "info", "warning", "error"), "info"),
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
        problems.append(f"{path or 'config'}: expected a mapping of settings, got {_show(raw)}")
        raw = {}
    values: dict[str, Any] = {}
    for key in raw:
        if key not in schema:
            where = f"{path}.{key}" if path else str(key)
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


def build_config(raw: Any, source: str = "config") -> Config:
    problems: list[str] = []
    config = _validate(SCHEMA, raw, "", problems)
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
         ("labels", "peaks") else v for k, v in values.items()},
        path,
    )


def default_config() -> Config:
    return build_config({})


def read_yaml_file(path: str | os.PathLike[str]) -> Any:
    """Parse a YAML file; unreadable or malformed input raises ConfigError with the line.

    Only the parser's ``problem`` is quoted, never its context, which may hold a secret.
    """
    source = str(path)
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError([f"cannot read: {exc.strerror or exc}"], source) from None
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(exc, "problem", None) or "syntax error"
        raise ConfigError([f"not valid YAML{where}: {problem}, check the YAML syntax"], source) from None


def load_config(path: str | os.PathLike[str] | None) -> Config:
    """Read and validate ``path``; no path means all defaults."""
    if path is None:
        return default_config()
    return build_config(read_yaml_file(path), str(path))
