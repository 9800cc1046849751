"""The loaded config is typed and read-only: frozen sections whose values have the declared types.

(``tests/integration/test_config_typing.py`` runs mypy over code that misspells a key.)
"""

from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Iterator, Mapping
from typing import Any

import pytest

from agent.core.config import SCHEMA, ConfigError, apply_overrides, build_config, default_config
from agent.core.config_fields import ConfigSection
from agent.core.config_schema import Config, LevelSchedule

# Every optional setting given a value, so each declared type is seen with something in it.
FULL: dict[str, Any] = {
    "web": {"config_file": "/etc/npuwatch/web.yml"},
    "labels": {"team": "infra", "rack": 7},
    "faults": {"codes_file": "/etc/npuwatch/faultCode.json", "escalation_file": "/etc/npuwatch/esc.json"},
    "collectors": {
        "npu_smi": {"path": "/usr/local/sbin/npu-smi", "disable": ["npu_smi_hccs_bw"], "enable": ["npu_smi_topo"]},
        "dcmi": {"enabled": False, "library": "/usr/local/dcmi/libdcmi.so"},
        "hccn_tool": {"path": "/usr/local/Ascend/driver/tools/hccn_tool"},
        "ascend_dmi": {"path": "/usr/local/Ascend/toolbox/ascend-dmi"},
        "hccl_logs": {"paths": ["/var/log/plog"], "globs": ["/jobs/**/*.log"], "kernel_log": "/var/log/kern.log",
                      "byte_budget": "1MiB"},
    },
    "probes": {
        "python": "/opt/torch/bin/python", "backend": "cpu", "model": "910B3", "stall": "30s",
        "peaks": {"910B3": {"fp16": 313.7e12}},
        "gemm": {"cron": "0 3 * * 0", "first_run": "10s", "size": 1024, "dtypes": ["fp16"]},
        "allreduce": {"cron": "0 4 * * 0", "first_run": 5, "size": "1MiB", "devices": [0, 1],
                      "min_bus_bandwidth": 10},
    },
    "check": {
        "flap_window": "5m", "hccl_window": "1h", "max_isolated_pages": 3, "expected_driver": "24.1.rc2",
        "expected_firmware": "7.5.0.1.129", "references": {"910B3": {"hbm_bandwidth": 1.5e12}},
        "baseline_file": "/etc/npuwatch/baseline.json", "prometheus_url": "http://prometheus:9090",
        "max_temperature": 90, "sustained_duration": "1m", "copy_size": "64MiB",
        "schedule": {"quick": {"enabled": True, "cron": "*/5 * * * *"}, "medium": {"cron": "0 2 * * *"},
                     "long": {"cron": "0 1 * * 6"}},
    },
    "kubernetes": {"pod_attribution": True},
}


def leaves(section: ConfigSection, path: str = "") -> Iterator[tuple[str, Any, Any]]:
    """(dotted key, value, declared type) of every setting below ``section``."""
    hints = typing.get_type_hints(type(section))
    for f in dataclasses.fields(section):
        value = getattr(section, f.name)
        dotted = f"{path}.{f.name}" if path else f.name
        if isinstance(value, ConfigSection):
            assert hints[f.name] is type(value), dotted
            yield from leaves(value, dotted)
        else:
            yield dotted, value, hints[f.name]


def conforms(value: Any, hint: Any) -> bool:
    """``value`` is of type ``hint`` (the shapes the config declares: unions, literals, tuples, mappings)."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        return any(conforms(value, arg) for arg in args)
    if origin is typing.Literal:
        return value in args
    if hint is type(None):
        return value is None
    if origin is tuple:
        return isinstance(value, tuple) and all(conforms(item, args[0]) for item in value)
    if origin is Mapping:
        return isinstance(value, Mapping) and all(conforms(k, args[0]) and conforms(v, args[1])
                                                  for k, v in value.items())
    if hint is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if hint is float:
        return type(value) is float  # checkers return float(...): no int where a float is declared
    return isinstance(value, hint)


@pytest.mark.parametrize("raw", [{}, FULL], ids=["defaults", "every-optional-set"])
def test_every_value_has_its_declared_type(raw: dict[str, Any]) -> None:
    found = list(leaves(build_config(raw)))
    assert [key for key, _, _ in found] == list(_schema_keys(SCHEMA))
    for key, value, hint in found:
        assert conforms(value, hint), f"{key}: {value!r} is not {hint}"


def test_the_full_config_leaves_no_optional_setting_unset() -> None:
    unset = [key for key, value, _ in leaves(build_config(FULL)) if value is None]
    assert unset == []


def test_a_mistyped_value_is_caught_by_the_type_check() -> None:
    assert not conforms(10, float) and not conforms(True, int) and not conforms(("a", 1), tuple[str, ...])
    assert not conforms("maybe", typing.Union[bool, typing.Literal["auto"]])
    assert conforms(None, typing.Optional[float]) and conforms(types.MappingProxyType({"a": "b"}), Mapping[str, str])


def test_sections_are_frozen() -> None:
    config = default_config()
    with pytest.raises(dataclasses.FrozenInstanceError):
        config.collectors.npu_smi.interval = 1.0  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        config.web = config.web  # type: ignore[misc]
    assert default_config().collectors.npu_smi.interval == 10.0


def test_mappings_inside_are_read_only() -> None:
    config = build_config(FULL)
    with pytest.raises(TypeError):
        config.labels["team"] = "other"  # type: ignore[index]
    assert config.probes.peaks is not None and config.check.references is not None
    with pytest.raises(TypeError):
        config.probes.peaks["910B3"]["fp16"] = 1.0  # type: ignore[index]
    with pytest.raises(TypeError):
        config.check.references["910B3"]["hbm_bandwidth"] = 1.0  # type: ignore[index]
    assert config.labels == {"team": "infra", "rack": "7"}


def test_overrides_give_a_new_config_and_leave_the_old_one() -> None:
    config = build_config(FULL)
    changed = apply_overrides(config, {"collectors.npu_smi.timeout": 2.5, "probes.gemm.size": 2048})
    assert (changed.collectors.npu_smi.timeout, changed.probes.gemm.size) == (2.5, 2048)
    assert (config.collectors.npu_smi.timeout, config.probes.gemm.size) == (10.0, 1024)
    assert changed.labels == config.labels and changed.probes.peaks == config.probes.peaks
    assert apply_overrides(config, {}) == config


def test_each_check_level_has_its_own_defaults_in_both_ways_of_building() -> None:
    built = default_config().check.schedule
    assert [(level.interval, level.first_run) for level in (built.quick, built.medium, built.long)] == [
        (300.0, 60.0), (86400.0, 600.0), (7 * 86400.0, 1800.0)]
    assert all(isinstance(level, LevelSchedule) for level in (built.quick, built.medium, built.long))
    assert SCHEMA["check"]["schedule"]["quick"]["interval"].default == 300.0


def test_the_dataclass_defaults_are_the_loader_defaults(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NODE_NAME", "npu-node-3")
    assert Config() == default_config()
    assert Config().labels == {"node": "npu-node-3"}


def _schema_keys(schema: Mapping[str, Any], path: str = "") -> Iterator[str]:
    for key, entry in schema.items():
        dotted = f"{path}.{key}" if path else key
        if isinstance(entry, Mapping):
            yield from _schema_keys(entry, dotted)
        else:
            yield dotted


def test_probe_settings_get_plain_tables_as_they_declare() -> None:
    from agent.probes.records import settings_from_config

    peaks = settings_from_config(build_config(FULL)).peaks
    assert peaks == {"910B3": {"fp16": 313.7e12}}
    assert type(peaks) is dict and all(type(per_dtype) is dict for per_dtype in peaks.values())


def test_a_check_level_is_found_by_its_name() -> None:
    schedule = build_config(FULL).check.schedule
    assert [schedule.level(name) for name in ("quick", "medium", "long")] == [
        schedule.quick, schedule.medium, schedule.long]
    assert schedule.level("quick").cron == "*/5 * * * *"
    with pytest.raises(KeyError):
        schedule.level("weekly")


@pytest.mark.parametrize(("raw", "problems"), [
    ([], ["config: expected a mapping of settings, got []"]),
    ({"web": 3}, ["web: expected a mapping of settings, got 3"]),
    ({"web": {"portt": 1}}, ["web.portt: unknown setting (known here: config_file, enabled, listen_address, "
                             "max_connections, max_connections_per_client, port)"]),
    ({"check": {"schedule": {"quick": {"interval": 0}}}},
     ["check.schedule.quick.interval: expected an interval between 1s and 30d, got 0"]),
    ({"collectors": {"hccl_logs": {"paths": "/var/log"}}},
     ['collectors.hccl_logs.paths: expected a list of strings, got "/var/log"']),
])
def test_the_loader_words_each_problem_with_its_path(raw: Any, problems: list[str]) -> None:
    with pytest.raises(ConfigError) as info:
        build_config(raw)
    assert info.value.problems == problems


def test_a_section_refuses_a_default_for_a_setting_it_lacks() -> None:
    from agent.core.config_fields import section

    with pytest.raises(TypeError, match="LevelSchedule has no setting 'intervall'"):
        section(LevelSchedule, defaults={"intervall": 1.0})
