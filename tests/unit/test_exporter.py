"""Snapshot store and exporter: freshness, self-metrics, caching, OpenMetrics."""

from __future__ import annotations

import logging
import math
import platform
import random

import pytest
from prometheus_client import CollectorRegistry
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.utils import floatToGoString

from agent import __version__
from agent.core.exporter import FAILSLOW_FAMILIES, FAILSLOW_METRICS, OPENMETRICS_CONTENT_TYPE, ExpositionCache
from agent.core.exposition import (
    STARTED_AT,
    SnapshotRenderer,
    _escape_help,
    _escape_value,
    _format_value,
    group_by_metric,
    render_family,
    self_metric_samples,
    valid_rows,
)
from agent.core.prom_collector import NpuwatchCollector
from agent.core.snapshot import SnapshotStore, SourceSnapshot
from collectors.base import Sample
from collectors.catalogue import CATALOGUE, MetricSpec


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


def _chip(npu: int, chip: int = 0) -> tuple[tuple[str, str], ...]:
    return (("npu", str(npu)), ("chip", str(chip)))


def _setup(const: dict[str, str] | None = None) -> tuple[Clock, SnapshotStore, CollectorRegistry, ExpositionCache]:
    clock = Clock()
    store = SnapshotStore(clock)
    store.register("npu_smi_info", 10)
    registry = CollectorRegistry(auto_describe=False)
    registry.register(NpuwatchCollector(store, const or {}, expected_chips=8))
    return clock, store, registry, ExpositionCache(SnapshotRenderer(store, const or {}, 8), store)


def test_self_metrics_exist_before_any_run() -> None:
    _clock, _store, registry, _cache = _setup()
    assert registry.get_sample_value("npuwatch_collector_up", {"collector": "npu_smi_info"}) == 0
    for reason in ("timeout", "exit", "parse", "missing_tool"):
        assert registry.get_sample_value(
            "npuwatch_collector_errors_total", {"collector": "npu_smi_info", "reason": reason}
        ) == 0
    assert registry.get_sample_value("npuwatch_expected_chips") == 8
    assert registry.get_sample_value("npuwatch_collector_last_success_timestamp_seconds",
                                      {"collector": "npu_smi_info"}) is None


def test_failed_run_serves_last_good_until_three_intervals() -> None:
    clock, store, registry, _ = _setup()
    store.put_success("npu_smi_info", [Sample("npu_power_watts", _chip(0), 93.4)], None, clock.now, 0.2)
    clock.now += 5
    store.put_failure("npu_smi_info", "timeout", "npu-smi: no answer within 10s", clock.now, 10)
    assert registry.get_sample_value("npu_power_watts", {"npu": "0", "chip": "0"}) == 93.4
    assert registry.get_sample_value("npuwatch_collector_up", {"collector": "npu_smi_info"}) == 0
    assert registry.get_sample_value(
        "npuwatch_collector_errors_total", {"collector": "npu_smi_info", "reason": "timeout"}) == 1
    clock.now += 26  # 31 s after the last success: older than 3 x 10 s
    assert registry.get_sample_value("npu_power_watts", {"npu": "0", "chip": "0"}) is None


def test_const_labels_and_counter_names() -> None:
    clock, store, _registry, cache = _setup({"node": "n7"})
    store.put_success(
        "npu_smi_info",
        [Sample("npu_hbm_ecc_errors_total", (*_chip(1), ("bit", "double")), 3)],
        None, clock.now, 0.1,
    )
    text = cache.render().body.decode()
    assert 'npu_hbm_ecc_errors_total{bit="double",chip="0",node="n7",npu="1"} 3.0' in text
    assert "# TYPE npu_hbm_ecc_errors_total counter" in text


def test_unknown_metrics_and_wrong_labels_are_dropped_and_duplicates_deduplicated() -> None:
    clock, store, registry, _ = _setup()
    store.put_success(
        "npu_smi_info",
        [
            Sample("npu_not_a_metric", (), 1),
            Sample("npu_power_watts", (("npu", "0"),), 1),
            Sample("npu_temperature_celsius", _chip(0), 40),
            Sample("npu_temperature_celsius", _chip(0), 41),
        ],
        None, clock.now, 0.1,
    )
    families = {f.name: f for f in registry.collect()}
    assert "npu_not_a_metric" not in families
    assert "npu_power_watts" in families and families["npu_power_watts"].samples == []
    assert [s.value for s in families["npu_temperature_celsius"].samples] == [40]


def test_cache_renders_once_per_change() -> None:
    clock, store, _registry, cache = _setup()
    store.put_success("npu_smi_info", [Sample("npu_power_watts", _chip(0), 90)], None, clock.now, 0.1)
    first = cache.render()
    assert cache.render().body is first.body  # same bytes object: no re-render
    store.put_success("npu_smi_info", [Sample("npu_power_watts", _chip(0), 91)], None, clock.now, 0.1)
    second = cache.render()
    assert second.body is not first.body and b"91.0" in second.body
    clock.now += 31  # expiry changes the output without a put
    assert b"npu_power_watts{" not in cache.render().body


def test_openmetrics_and_text_parse_back() -> None:
    clock, store, _registry, cache = _setup()
    store.put_success("npu_smi_info", [Sample("npu_power_watts", _chip(0), 90)], None, clock.now, 0.1)
    om = cache.render(openmetrics=True)
    assert om.content_type.startswith("application/openmetrics-text")
    assert om.body.endswith(b"# EOF\n")
    names = {f.name for f in text_string_to_metric_families(cache.render().body.decode())}
    assert {"npu_power_watts", "npuwatch_collector_up", "npuwatch_build_info"} <= names


def test_catalogue_names_follow_conventions() -> None:
    for name, spec in CATALOGUE.items():
        assert name.startswith(("npu_", "npuwatch_")), name
        assert (spec.type == "counter") == name.endswith("_total"), name
        assert not name.endswith(("_percent", "_milliseconds", "_megabytes")), name
    # OpenMetrics family names must stay unique: a counter X_total owns family X.
    families = [n.removesuffix("_total") if s.type == "counter" else n for n, s in CATALOGUE.items()]
    assert len(families) == len(set(families))


def test_fast_renderer_matches_prometheus_client() -> None:
    from prometheus_client.exposition import generate_latest
    from prometheus_client.openmetrics.exposition import generate_latest as generate_openmetrics

    clock, store, registry, cache = _setup({"node": 'n"1\\x'})
    store.register("npu_smi_ecc", 60)
    store.put_success("npu_smi_info", [
        Sample("npu_power_watts", _chip(0), 93.4),
        Sample("npu_hbm_total_bytes", _chip(1), 68719476736.0),
        Sample("npu_info", (*_chip(0), ("model", "910B3"), ("bus_id", "0000:C1:00.0"), ("logic_id", "0"),
                            ("serial", ""), ("firmware", "7.1\nx"), ("driver", "24.1.rc2")), 1.0),
        Sample("npu_chips", (), 2),
    ], None, clock.now, 0.25)
    store.put_success("npu_smi_ecc", [Sample("npu_hbm_ecc_errors_total", (*_chip(0), ("bit", "double")), 3)],
                      None, clock.now, 0.1)
    store.put_failure("npu_smi_ecc", "parse", "x", clock.now, 0.1)
    assert _same(cache.render().body, generate_latest(registry))
    ours = cache.render(openmetrics=True).body.decode()
    theirs = generate_openmetrics(registry).decode()
    assert sorted(ours.splitlines()) == sorted(theirs.splitlines())


def test_a_histogram_renders_as_prometheus_client_renders_it() -> None:
    from prometheus_client.exposition import generate_latest
    from prometheus_client.openmetrics.exposition import generate_latest as generate_openmetrics

    from agent.dcmi.event_counts import EventCounts, parse_event
    from collectors.base import ChipRef

    clock, store, registry, cache = _setup({"node": "n1"})
    store.register("dcmi_events", 15, None)
    counts = EventCounts(lambda: {"subscribed": True}, lambda: True)
    event = parse_event({"event_id": 0x80818C00, "deviceid": 32, "severity": 3, "assertion": 1,
                         "alarm_raised_time": 1_000_000_000_000, "event_serial_num": 1})
    for latency in (0.003, 0.2, 7.0):
        counts.counted(ChipRef(0, 0), event, 1_000_000_000 + latency)
    store.put_success("dcmi_events", counts.samples(), None, clock.now, 0.01)
    ours = cache.render().body
    assert b'npuwatch_dcmi_event_latency_seconds_bucket{le="0.005",node="n1"} 1.0' in ours
    assert _same(ours, generate_latest(registry))
    assert sorted(cache.render(openmetrics=True).body.decode().splitlines()) == sorted(
        generate_openmetrics(registry).decode().splitlines())


def _same(ours: bytes, theirs: bytes) -> bool:
    """Same families and samples; only the order of families may differ."""
    return sorted(ours.decode().splitlines()) == sorted(theirs.decode().splitlines())


def test_renderer_reuses_unchanged_sources() -> None:
    clock, store, _registry, cache = _setup()
    store.register("host", 15)
    store.put_success("npu_smi_info", [Sample("npu_power_watts", _chip(0), 90)], None, clock.now, 0.1)
    store.put_success("host", [Sample("npuwatch_host_load1", (), 0.5)], None, clock.now, 0.1)
    cache.render()
    renderer = cache._renderer
    before = renderer._blocks["npu_smi_info"][1]
    store.put_success("host", [Sample("npuwatch_host_load1", (), 0.7)], None, clock.now, 0.1)
    assert b"npuwatch_host_load1 0.7" in cache.render().body
    assert renderer._blocks["npu_smi_info"][1] is before


GAUGE = MetricSpec("x_power_watts", "gauge", "Power.", ("npu", "chip"), "test")
BARE = MetricSpec("x_chips", "gauge", "Chips.", (), "test")
COUNTER = MetricSpec("x_errors_total", "counter", "Errors \\ and\nlines.", ("reason",), "test")


def chip(npu: str, value: float, metric: str = "x_power_watts") -> Sample:
    return Sample(metric, (("npu", npu), ("chip", "0")), value)


@pytest.mark.parametrize(("raw", "escaped"), [
    ("plain", "plain"),
    ("a\\b", "a\\\\b"),
    ("a\nb", "a\\nb"),
    ('a"b', 'a\\"b'),
    ('\\\n"', '\\\\\\n\\"'),
])
def test_escape_value_each_special_character_alone(raw: str, escaped: str) -> None:
    assert _escape_value(raw) == escaped


def test_escape_help_escapes_backslash_and_newline_only() -> None:
    assert _escape_help('a\\b\nc"d') == 'a\\\\b\\nc"d'


@pytest.mark.parametrize("value", [0.0, -0.0, 1.0, -1.0, 0.5, 93.4, 123456.0, 1234567.0, 12345678.0, 1e7, 1.5e9,
                                   -12345678.0, 2.0**64, 1e-7, math.inf, -math.inf, 1e22, 9999999.0,
                                   12345678.5, 1e20, 1.5e16, 1000000.0, 10000000.25])
def test_format_value_is_prometheus_clients(value: float) -> None:
    assert _format_value(value) == floatToGoString(value)


def test_format_value_is_prometheus_clients_for_random_values() -> None:
    rng = random.Random(39)
    values = [rng.uniform(-1, 1) * 10.0 ** rng.randint(-30, 30) for _ in range(2000)]
    values += [float(rng.randint(0, 10**18)) for _ in range(500)] + [rng.randint(1, 10**9) / 8 for _ in range(500)]
    assert [_format_value(value) for value in values] == [floatToGoString(value) for value in values]


def test_format_value_nan() -> None:
    assert _format_value(math.nan) == "NaN"


def test_valid_rows_keeps_matching_labels_and_the_first_duplicate() -> None:
    samples = [
        chip("0", 1.0),
        chip("0", 2.0),                                          # duplicate series: first wins
        Sample("x_power_watts", (("npu", "1"),), 3.0),            # too few labels
        Sample("x_power_watts", (("chip", "0"), ("npu", "2")), 4.0),  # names in the wrong order
        Sample("x_power_watts", (("npu", "3"), ("die", "0")), 5.0),   # wrong name
        chip("4", 6.0),
    ]
    assert list(valid_rows(GAUGE, samples)) == [(("0", "0"), 1.0), (("4", "0"), 6.0)]


def test_valid_rows_of_an_unlabelled_metric() -> None:
    samples = [Sample("x_chips", (("npu", "0"),), 1.0), Sample("x_chips", (), 8.0), Sample("x_chips", (), 9.0)]
    assert list(valid_rows(BARE, samples)) == [((), 8.0)]


def test_render_family_text_and_openmetrics() -> None:
    block = render_family(GAUGE, [chip("1", 93.5), chip("0", 12.0)], {"node": 'a"b'})
    body = ('x_power_watts{chip="0",node="a\\"b",npu="1"} 93.5\n'
            'x_power_watts{chip="0",node="a\\"b",npu="0"} 12.0\n')
    assert block.name == "x_power_watts"
    assert block.text == "# HELP x_power_watts Power.\n# TYPE x_power_watts gauge\n" + body
    assert block.openmetrics == block.text


def test_render_family_of_a_counter_names_the_family_without_total() -> None:
    block = render_family(COUNTER, [Sample("x_errors_total", (("reason", "exit"),), 2.0)], {})
    body = 'x_errors_total{reason="exit"} 2.0\n'
    assert block.name == "x_errors"
    assert block.text == ("# HELP x_errors_total Errors \\\\ and\\nlines.\n# TYPE x_errors_total counter\n" + body)
    assert block.openmetrics == "# HELP x_errors Errors \\\\ and\\nlines.\n# TYPE x_errors counter\n" + body


def test_render_family_without_any_label() -> None:
    block = render_family(BARE, [Sample("x_chips", (), 8.0)], {})
    assert block.text == "# HELP x_chips Chips.\n# TYPE x_chips gauge\nx_chips 8.0\n"
    assert render_family(BARE, [Sample("x_chips", (), 8.0)], {"node": "n1"}).text.endswith('x_chips{node="n1"} 8.0\n')


def test_self_metric_samples_of_an_up_and_a_down_collector() -> None:
    up = SourceSnapshot("temp", 15.0, 45.0, duration_s=0.5, ok=True, down_reason=None, last_success=100.0,
                        errors={"timeout": 2, "exit": 0, "parse": 1, "missing_tool": 0}, rejections=3)
    down = SourceSnapshot("hccn", 30.0, 90.0, down_reason=None)
    never = SourceSnapshot("ecc", 30.0, 90.0)
    samples = self_metric_samples([up, down, never], 16)
    assert samples == [
        Sample("npuwatch_build_info", (("version", __version__), ("python", platform.python_version())), 1.0),
        Sample("npuwatch_expected_chips", (), 16.0),
        Sample("npuwatch_start_time_seconds", (), STARTED_AT),
        Sample("npuwatch_collector_up", (("collector", "temp"),), 1.0),
        Sample("npuwatch_collector_duration_seconds", (("collector", "temp"),), 0.5),
        Sample("npuwatch_collector_last_success_timestamp_seconds", (("collector", "temp"),), 100.0),
        Sample("npuwatch_collector_interval_seconds", (("collector", "temp"),), 15.0),
        Sample("npuwatch_collector_errors_total", (("collector", "temp"), ("reason", "timeout")), 2.0),
        Sample("npuwatch_collector_errors_total", (("collector", "temp"), ("reason", "exit")), 0.0),
        Sample("npuwatch_collector_errors_total", (("collector", "temp"), ("reason", "parse")), 1.0),
        Sample("npuwatch_collector_errors_total", (("collector", "temp"), ("reason", "missing_tool")), 0.0),
        Sample("npuwatch_parse_rejections_total", (("collector", "temp"),), 3.0),
        Sample("npuwatch_collector_up", (("collector", "hccn"),), 0.0),
        Sample("npuwatch_collector_down_reason", (("collector", "hccn"), ("reason", "not_run")), 1.0),
        Sample("npuwatch_collector_interval_seconds", (("collector", "hccn"),), 30.0),
        *[Sample("npuwatch_collector_errors_total", (("collector", "hccn"), ("reason", reason)), 0.0)
          for reason in ("timeout", "exit", "parse", "missing_tool")],
        Sample("npuwatch_parse_rejections_total", (("collector", "hccn"),), 0.0),
        Sample("npuwatch_collector_up", (("collector", "ecc"),), 0.0),
        Sample("npuwatch_collector_down_reason", (("collector", "ecc"), ("reason", "not_run")), 1.0),
        Sample("npuwatch_collector_interval_seconds", (("collector", "ecc"),), 30.0),
        *[Sample("npuwatch_collector_errors_total", (("collector", "ecc"), ("reason", reason)), 0.0)
          for reason in ("timeout", "exit", "parse", "missing_tool")],
        Sample("npuwatch_parse_rejections_total", (("collector", "ecc"),), 0.0),
    ]
    missing = SourceSnapshot("x", 1.0, 3.0, errors={})
    assert Sample("npuwatch_collector_errors_total", (("collector", "x"), ("reason", "exit")), 0.0) in \
        self_metric_samples([missing], 0)


def test_group_by_metric_keeps_order_within_a_metric() -> None:
    a, b, c = chip("0", 1.0), Sample("x_chips", (), 2.0), chip("1", 3.0)
    assert group_by_metric([a, b, c]) == {"x_power_watts": [a, c], "x_chips": [b]}


class FixedClock:
    now = 1000.0

    def __call__(self) -> float:
        return self.now


def store_with(clock: FixedClock) -> SnapshotStore:
    store = SnapshotStore(clock)
    store.register("b_src", 10.0)
    store.register("a_src", 10.0)
    return store


def test_render_orders_sources_skips_stale_ones_and_ends_openmetrics_with_eof() -> None:
    clock = FixedClock()
    store = store_with(clock)
    store.put_success("b_src", [Sample("npu_power_watts", (("npu", "1"), ("chip", "0")), 90.0)], None, 1.0, 1.0)
    store.put_success("a_src", [Sample("npu_chips", (), 2.0)], None, 1.0, 1.0)
    renderer = SnapshotRenderer(store, {}, 2)
    text = renderer.render(False).decode()
    assert text.index("npu_chips 2.0") < text.index('npu_power_watts{chip="0",npu="1"} 90.0')
    assert text.index("npu_power_watts{") < text.index("# HELP npuwatch_build_info")
    assert not text.endswith("# EOF\n")
    openmetrics = renderer.render(True).decode()
    assert openmetrics.endswith("# EOF\n")
    assert openmetrics.count("# EOF") == 1
    clock.now = 1031.0  # a_src and b_src are 31 s old: stale after 30 s
    stale = renderer.render(False).decode()
    assert "npu_chips 2.0" not in stale
    assert "npu_power_watts{" not in stale
    assert 'npuwatch_collector_up{collector="a_src"} 1.0' in stale


def test_render_reuses_blocks_until_the_samples_change_and_drops_gone_sources() -> None:
    clock = FixedClock()
    store = store_with(clock)
    renderer = SnapshotRenderer(store, {"node": "n1"}, 1)
    store.put_success("a_src", [Sample("npu_chips", (), 2.0)], None, 1.0, 1.0)
    first = renderer.render(False)
    assert b'npu_chips{node="n1"} 2.0\n' in first
    snap = store.get("a_src")
    assert snap is not None
    renderer.warm(snap)
    blocks = renderer._blocks["a_src"][1]
    renderer.render(False)
    assert renderer._blocks["a_src"][1] is blocks
    store.put_success("a_src", [Sample("npu_chips", (), 3.0)], None, 1.0, 1.0)
    assert b'npu_chips{node="n1"} 3.0\n' in renderer.render(False)
    store.unregister("a_src")
    assert b"npu_chips{" not in renderer.render(False)
    assert "a_src" not in renderer._blocks


def test_render_keeps_the_first_source_of_a_family_and_drops_unknown_metrics(
        caplog: pytest.LogCaptureFixture) -> None:
    clock = FixedClock()
    store = store_with(clock)
    store.put_success("a_src", [Sample("npu_chips", (), 2.0), Sample("no_such_metric", (), 1.0)], None, 1.0, 1.0)
    store.put_success("b_src", [Sample("npu_chips", (), 5.0)], None, 1.0, 1.0)
    renderer = SnapshotRenderer(store, {}, 1)
    with caplog.at_level(logging.ERROR, logger="agent.core.exposition"):
        text = renderer.render(False).decode()
        renderer.render(False)
        store.put_success("a_src", [Sample("no_such_metric", (), 2.0)], None, 1.0, 1.0)
        renderer.render(False)
    assert "npu_chips 2.0" in text
    assert "npu_chips 5.0" not in text
    assert "no_such_metric" not in text
    messages = [record.getMessage() for record in caplog.records]
    assert messages == [
        "dropping metric no_such_metric from a_src: not in the catalogue",
        "metric family npu_chips exported by two sources; kept the first",
    ]


def test_render_lists_every_self_metric_family_even_without_collectors() -> None:
    renderer = SnapshotRenderer(SnapshotStore(FixedClock()), {}, 0)
    text = renderer.render(False).decode()
    for name in SnapshotRenderer.SELF_METRICS:
        assert f"# TYPE {name} " in text
    assert "npuwatch_expected_chips 0.0\n" in text


def test_a_stale_source_does_not_hide_the_next_one() -> None:
    clock = FixedClock()
    store = store_with(clock)
    store.put_success("a_src", [Sample("npu_chips", (), 2.0)], None, 1.0, 1.0)
    clock.now = 1031.0
    store.put_success("b_src", [Sample("npu_power_watts", (("npu", "1"), ("chip", "0")), 90.0)], None, 1.0, 1.0)
    text = SnapshotRenderer(store, {}, 1).render(False).decode()
    assert "npu_chips 2.0" not in text
    assert 'npu_power_watts{chip="0",npu="1"} 90.0' in text


def test_a_duplicate_family_does_not_hide_the_families_after_it() -> None:
    store = store_with(FixedClock())
    store.put_success("a_src", [Sample("npu_chips", (), 2.0)], None, 1.0, 1.0)
    store.put_success("b_src", [Sample("npu_chips", (), 5.0),
                                Sample("npu_power_watts", (("npu", "1"), ("chip", "0")), 90.0)], None, 1.0, 1.0)
    text = SnapshotRenderer(store, {}, 1).render(False).decode()
    assert "npu_chips 2.0" in text and "npu_chips 5.0" not in text
    assert 'npu_power_watts{chip="0",npu="1"} 90.0' in text


def test_openmetrics_content_type_is_prometheus_clients() -> None:
    from prometheus_client.openmetrics.exposition import CONTENT_TYPE_LATEST

    assert OPENMETRICS_CONTENT_TYPE == CONTENT_TYPE_LATEST


def test_the_failslow_exposition_holds_only_the_failslow_families_and_follows_the_store() -> None:
    clock, store, _registry, cache = _setup()
    store.register("hccn_stat", 5)
    store.put_success("npu_smi_info", [Sample("npu_power_watts", _chip(0), 90),
                                       Sample("npu_aicore_utilization_ratio", _chip(0), 0.5)], None, clock.now, 0.1)
    store.put_success("hccn_stat", [Sample("npu_roce_pfc_pause_frames_total", (*_chip(0), ("direction", "rx")), 7),
                                    Sample("npu_roce_errors_total", (*_chip(0), ("counter", "roce_rx_err")), 1)],
                      None, clock.now, 0.1)
    fast = cache.render(failslow=True)
    families = {family.name for family in text_string_to_metric_families(fast.body.decode())}
    assert families == {"npu_aicore_utilization_ratio", "npu_roce_pfc_pause_frames", "npu_roce_errors"}
    assert families <= FAILSLOW_FAMILIES and b"npuwatch_collector_up" not in fast.body
    assert b"npu_power_watts" in cache.render().body and cache.render(failslow=True).body is fast.body
    om = cache.render(openmetrics=True, failslow=True).body.decode()
    assert om.endswith("# EOF\n") and "# TYPE npu_roce_errors counter" in om
    store.put_success("npu_smi_info", [Sample("npu_aicore_utilization_ratio", _chip(0), 0.75)], None, clock.now, 0.1)
    assert b"0.75" in cache.render(failslow=True).body
    assert {name.removesuffix("_total") for name in FAILSLOW_METRICS} == FAILSLOW_FAMILIES


def test_a_family_with_an_owner_comes_from_the_owner_while_it_is_fresh(caplog: pytest.LogCaptureFixture) -> None:
    clock = Clock()
    store = SnapshotStore(clock)
    store.register("npu_smi_info", 10)
    store.register("npu_fast", 5)
    renderer = SnapshotRenderer(store, {}, 1, owners={"npu_aicore_utilization_ratio": "npu_fast"})
    store.put_success("npu_smi_info", [Sample("npu_aicore_utilization_ratio", _chip(0), 0.25),
                                       Sample("npu_power_watts", _chip(0), 90)], None, clock.now, 0.1)
    assert 'npu_aicore_utilization_ratio{chip="0",npu="0"} 0.25' in renderer.render(False).decode()  # no owner yet
    store.put_success("npu_fast", [Sample("npu_aicore_utilization_ratio", _chip(0), 0.5)], None, clock.now, 0.1)
    clock.now += 10  # both fresh: the table for 30 s, the owner for 15 s
    text = renderer.render(False).decode()
    assert 'npu_aicore_utilization_ratio{chip="0",npu="0"} 0.5' in text and "0.25" not in text
    assert text.count("# TYPE npu_aicore_utilization_ratio") == 1 and "npu_power_watts{" in text
    clock.now += 10  # the owner is stale, the table is not: the table's reading is shown again
    assert 'npu_aicore_utilization_ratio{chip="0",npu="0"} 0.25' in renderer.render(False).decode()
    assert "two sources" not in caplog.text  # a designed hand-over, not a collision


def test_a_source_rendered_again_with_new_values_renders_as_a_fresh_renderer_would() -> None:
    """The series' heads kept from the last render (name and labels) never leak an old series or label."""
    clock = FixedClock()
    store = store_with(clock)
    store.register("hccn_stat", 5.0)
    kept = SnapshotRenderer(store, {"node": "n\"1"}, 1)

    def port(npu: int, counter: str) -> tuple[tuple[str, str], ...]:
        return (("npu", str(npu)), ("chip", "0"), ("counter", counter))

    rounds = [
        [Sample("npu_roce_errors_total", port(0, "roce_rx_err_pkt_num"), 1.0),
         Sample("npu_roce_errors_total", port(1, "roce_rx_err_pkt_num"), 2.0),
         Sample("npu_chips", (), 2.0)],
        [Sample("npu_roce_errors_total", port(1, "roce_rx_err_pkt_num"), 5.0),  # npu 0 gone
         Sample("npu_roce_errors_total", port(1, "mac_rx_bad_pkt_num"), 7.0),   # a new series
         Sample("npu_chips", (), 1.0)],
        [Sample("npu_roce_errors_total", port(0, "roce_rx_err_pkt_num"), 9.0)],  # npu 0 back, npu_chips gone
    ]
    for samples in rounds:
        store.put_success("hccn_stat", samples, None, 1.0, 1.0)
        snap = store.get("hccn_stat")
        assert snap is not None
        kept.warm(snap)
        fresh = SnapshotRenderer(store, {"node": "n\"1"}, 1)
        for openmetrics in (False, True):
            assert kept.render(openmetrics) == fresh.render(openmetrics)
    assert set(kept._heads["hccn_stat"]["npu_roce_errors_total"]) == {("0", "0", "roce_rx_err_pkt_num")}
    store.unregister("hccn_stat")
    kept.render(False)
    assert "hccn_stat" not in kept._heads
