"""Configuration: one YAML file, every setting defaulted, validated up front.

``load_config(path)`` returns a ``Config`` (``agent.core.config_schema``: frozen dataclasses, one per
section); any problem (unknown key, wrong type, bad duration) raises ``ConfigError`` listing every
problem with its path, e.g. ``collectors.npu_smi.interval: expected a duration like 10s, got "fast"``.
"""

from __future__ import annotations

import difflib
import os
from typing import Any

from agent.core.config_fields import build_section, schema_of
from agent.core.config_schema import DEFAULT_PORT, Config
from agent.core.config_values import (
    MIN_INTERVAL_S,
    ConfigError,
    format_duration,
    parse_duration,
    parse_size,
    read_yaml_file,
    show,
)

__all__ = [
    "DEFAULT_PORT",
    "SCHEMA",
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

# Every setting as nested {key: Setting(check, default, doc, derive)}, in declaration order: what
# scripts/gen_docs.py writes docs/configuration.md from.
SCHEMA: dict[str, Any] = schema_of(Config)


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


def _check_cpu_ranks(config: Config, problems: list[str]) -> None:
    """The cpu backend's ranks stand for chips: it never runs beside a collector of real chips' readings."""
    collectors = config.collectors
    if not collectors.cpu_ranks.enabled:
        return
    beside = [f"collectors.{name}.enabled" for name, on in (
        ("npu_smi", collectors.npu_smi.enabled), ("dcmi", collectors.dcmi.enabled is not False),
        ("hccn_tool", collectors.hccn_tool.enabled)) if on]
    if beside:
        problems.append("collectors.cpu_ranks.enabled: the cpu backend exports CPU ranks under the chips' metric "
                        f"names and never runs beside the NPU collectors; set {', '.join(beside)} to false")


def _check_failslow_reads(config: Config, problems: list[str]) -> None:
    """The busy fraction's reads (agent/core/samplers.py) run no more often than a scheduled job may."""
    dcmi = config.collectors.dcmi
    if dcmi.failslow_interval is not None and dcmi.failslow_interval / dcmi.failslow_reads < MIN_INTERVAL_S:
        problems.append(f"collectors.dcmi.failslow_reads: {dcmi.failslow_reads} reads in "
                        f"{format_duration(dcmi.failslow_interval)} is one every "
                        f"{format_duration(dcmi.failslow_interval / dcmi.failslow_reads)}; at most one a second "
                        f"(at most {int(dcmi.failslow_interval // MIN_INTERVAL_S)} here)")


def build_config(raw: Any, source: str = "config") -> Config:
    """A raw YAML document as a Config; every problem at once in one ConfigError."""
    problems: list[str] = []
    config = build_section(Config, raw, "", problems)
    _check_source_names(config, problems)
    _check_cpu_ranks(config, problems)
    _check_failslow_reads(config, problems)
    if problems:
        raise ConfigError(problems, source)
    return config


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
