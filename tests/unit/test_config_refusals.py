"""check-config refuses what `run` would choke on, reports every problem, and never echoes a whole value;
cron schedules run (crontab weekdays, local time, jitter) through `run` and SIGHUP; `once` says when it
collected nothing."""

from __future__ import annotations

import datetime as dt
import time
from pathlib import Path

import pytest

from agent.core.config import ConfigError, build_config, load_config
from agent.core.cron import CronError, cron_trigger, parse_cron

# --- cron ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("expression", "weekdays"), [
    ("0 3 * * *", "*"),
    ("0 3 * * 0", "sun"),  # crontab: 0 is Sunday (APScheduler 3 alone would read Monday)
    ("0 3 * * 7", "sun"),
    ("0 3 * * 1", "mon"),
    ("0 3 * * 6", "sat"),
    ("0 3 * * 1-5", "mon,tue,wed,thu,fri"),
    ("0 3 * * 5-7", "sun,fri,sat"),
    ("0 3 * * */2", "sun,tue,thu,sat"),
    ("0 3 * * sat,sun", "sun,sat"),
])
def test_crontab_weekdays(expression: str, weekdays: str) -> None:
    assert parse_cron(expression)[4] == weekdays


def test_a_sunday_cron_fires_on_sunday_in_the_given_zone() -> None:
    zone = dt.timezone(dt.timedelta(hours=8))
    trigger = cron_trigger("30 2 * * 0", timezone=zone)
    after = dt.datetime(2026, 12, 2, 12, 0, tzinfo=zone)  # a Wednesday
    fire = trigger.get_next_fire_time(None, after)
    assert fire is not None
    assert (fire.weekday(), fire.hour, fire.minute) == (6, 2, 30)  # Sunday 02:30 in that zone
    assert fire.utcoffset() == dt.timedelta(hours=8)


def test_cron_jitter_is_kept() -> None:
    assert cron_trigger("0 * * * *", jitter_s=300).jitter == 300
    assert cron_trigger("0 * * * *", jitter_s=0).jitter is None


@pytest.mark.parametrize(("expression", "why"), [
    ("0 3 * *", "expected 5 fields"),
    ("0 25 * * *", "23"),
    ("0 3 * * 8", "day of week '8'"),
    ("0 3 1 * 1", "not both"),
    ("0 3 * * 5-1", "backwards"),
    ("0 3 * * */0", "positive"),
])
def test_bad_cron_is_refused_with_why(expression: str, why: str) -> None:
    with pytest.raises(CronError, match=why):
        parse_cron(expression)


# --- check-config -------------------------------------------------------------------------------------


@pytest.mark.parametrize("port", [0, 65536, 70000])
def test_ports_outside_1_to_65535_are_refused(port: int) -> None:
    with pytest.raises(ConfigError, match=r"web\.port"):
        build_config({"web": {"port": port}})


@pytest.mark.parametrize("port", [1, 9611, 65535])
def test_ports_inside_the_range_are_accepted(port: int) -> None:
    assert build_config({"web": {"port": port}}).web.port == port


@pytest.mark.parametrize(("size", "ok"), [
    ("64MiB", True), ("1GiB", True), ("4096", True), ("1TiB", True), ("10MB", True),
    ("64 MiB", False), ("64 MB", False), ("64mb", False), ("64MiBs", False), (" 64MiB", False),
])
def test_sizes_take_no_space_and_only_known_units(size: str, ok: bool) -> None:
    raw = {"collectors": {"hccl_logs": {"byte_budget": size}}}
    if ok:
        assert build_config(raw).collectors.hccl_logs.byte_budget > 0
    else:
        with pytest.raises(ConfigError, match="byte_budget"):
            build_config(raw)


@pytest.mark.parametrize(("where", "names", "valid"), [
    ("npu_smi", {"disable": ["npu_smi_hccs_bw", "npu_smi_topo"]}, True),
    ("npu_smi", {"enable": ["npu_smi_topo"]}, True),
    ("npu_smi", {"enable": ["npu_smi_info"]}, False),  # on by default: not an opt-in
    ("npu_smi", {"disable": ["hccn_link"]}, False),  # another tool's source
    ("hccn_tool", {"disable": ["hccn_speed", "hccn_optical"]}, True),
    ("hccn_tool", {"disable": ["hccn_optics"]}, False),
])
def test_source_names_are_checked(where: str, names: dict, valid: bool) -> None:
    raw = {"collectors": {where: names}}
    if valid:
        build_config(raw)
    else:
        with pytest.raises(ConfigError, match=f"collectors.{where}"):
            build_config(raw)


def test_an_alias_bomb_is_refused_quickly(tmp_path: Path) -> None:
    lines = ['a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    for index in range(8):
        prev, name = "abcdefgh"[index], "bcdefghi"[index]
        lines.append(f"{name}: &{name} [{','.join(['*' + prev] * 9)}]")
    bomb = tmp_path / "bomb.yaml"
    bomb.write_text("\n".join(lines) + "\n")
    started = time.monotonic()
    with pytest.raises(ConfigError, match="aliases"):
        load_config(bomb)
    assert time.monotonic() - started < 1.0


def test_aliases_a_real_config_uses_are_fine(tmp_path: Path) -> None:
    path = tmp_path / "config.yaml"
    path.write_text("probes:\n  gemm: {jitter: &j 1m}\n  allreduce: {jitter: *j}\n")
    assert load_config(path).probes.allreduce.jitter == 60.0


def test_a_file_over_one_mib_is_refused_unparsed(tmp_path: Path) -> None:
    path = tmp_path / "config.yaml"
    path.write_text("# " + "y" * (1 << 20) + "\n")
    started = time.monotonic()
    with pytest.raises(ConfigError, match="larger than 1 MiB"):
        load_config(path)
    assert time.monotonic() - started < 1.0


def test_a_file_just_under_one_mib_is_read(tmp_path: Path) -> None:
    path = tmp_path / "config.yaml"
    path.write_text("log_level: debug\n# " + "y" * ((1 << 20) - 40) + "\n")
    assert path.stat().st_size <= 1 << 20
    assert load_config(path).log_level == "debug"


def test_duplicate_keys_are_refused_with_both_lines(tmp_path: Path) -> None:
    path = tmp_path / "config.yaml"
    path.write_text("web:\n  port: 9611\nlog_level: info\nweb:\n  port: 9700\n"
                    "collectors:\n  npu_smi: {interval: 10s, interval: 20s}\n")
    with pytest.raises(ConfigError) as caught:
        load_config(path)
    assert caught.value.problems == [
        "web: duplicate key at line 4 (first at line 1); YAML would keep only the last, so write it once",
        "collectors.npu_smi.interval: duplicate key at line 7 (first at line 7); "
        "YAML would keep only the last, so write it once",
    ]


def test_a_merge_key_overriding_merged_keys_is_not_a_duplicate(tmp_path: Path) -> None:
    path = tmp_path / "config.yaml"
    path.write_text("probes:\n  gemm: &base {jitter: 1m, enabled: false}\n"
                    "  allreduce:\n    <<: *base\n    jitter: 2m\n")
    assert load_config(path).probes.allreduce.jitter == 120.0


def test_deep_nesting_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "config.yaml"
    path.write_text("[" * 100_000 + "]" * 100_000)
    with pytest.raises(ConfigError):
        load_config(path)


# --- run and SIGHUP -----------------------------------------------------------------------------------


# --- once ---------------------------------------------------------------------------------------------


# --- durations and intervals a scheduler or a timer cannot take --------------------------------------

_INTERVAL_KEYS = ["collectors.npu_smi.interval", "collectors.npu_smi.usages_interval",
                  "collectors.npu_smi.health_interval", "collectors.npu_smi.inventory_interval",
                  "collectors.hccn_tool.interval", "collectors.host.interval", "textfile.interval",
                  "collectors.hccl_logs.interval", "collectors.dcmi.verify_interval", "probes.gemm.interval",
                  "check.schedule.long.interval", "kubernetes.interval"]


def _nested(dotted: str, value: object) -> dict:
    raw: dict = {}
    level = raw
    *parents, leaf = dotted.split(".")
    for name in parents:
        level = level.setdefault(name, {})
    level[leaf] = value
    return raw


@pytest.mark.parametrize("key", _INTERVAL_KEYS)
@pytest.mark.parametrize(("text", "why"), [
    (".inf", "expected a finite duration of at most 365d, got inf"),
    ("-.inf", "expected a duration like 10s, got -inf"),
    (".nan", "expected a finite duration of at most 365d, got nan"),
    ("1.0e+300", "expected a finite duration of at most 365d, got 1e+300"),
    ('"99999999999999999999d"', 'expected a finite duration of at most 365d, got "99999999999999999999d"'),
    (str(2**63), f"expected a finite duration of at most 365d, got {2**63}"),
    ("1" * 400, "expected a finite duration of at most 365d, got " + "1" * 57 + "..."),
    ("1.0e-7", "expected an interval between 1s and 30d, got 1e-07"),
    ("500ms", 'expected an interval between 1s and 30d, got "500ms"'),
    ("31d", 'expected an interval between 1s and 30d, got "31d"'),
])
def test_an_interval_the_scheduler_cannot_run_is_refused_with_its_key(tmp_path: Path, key: str, text: str,
                                                                      why: str) -> None:
    path = tmp_path / "c.yaml"
    *parents, leaf = key.split(".")
    path.write_text("".join(f"{'  ' * depth}{name}:\n" for depth, name in enumerate(parents))
                    + f"{'  ' * len(parents)}{leaf}: {text}\n")
    with pytest.raises(ConfigError) as info:
        load_config(path)
    assert info.value.problems == [f"{key}: {why}"]


@pytest.mark.parametrize("key", _INTERVAL_KEYS)
def test_intervals_at_the_bounds_are_accepted_and_the_scheduler_takes_them(key: str) -> None:
    from apscheduler.triggers.interval import IntervalTrigger

    for seconds in (1, 30 * 86400):
        config = build_config(_nested(key, seconds))
        value = config
        for name in key.split("."):
            value = getattr(value, name)
        IntervalTrigger(seconds=value)


@pytest.mark.parametrize("key", ["collectors.npu_smi.timeout", "collectors.hccl_logs.first_start_window",
                                 "probes.gemm.jitter", "probes.deadline", "check.flap_window"])
@pytest.mark.parametrize("value", [float("inf"), float("nan"), 1e300, 10**400, "366d"])
def test_other_durations_are_finite_and_at_most_a_year(key: str, value: object) -> None:
    with pytest.raises(ConfigError, match=rf"^invalid config:\n  - {key}: expected a finite duration of at most "
                                          r"365d, got "):
        build_config(_nested(key, value))
    build_config(_nested(key, "365d"))
