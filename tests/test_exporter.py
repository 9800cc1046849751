"""Snapshot store and exporter: freshness, self-metrics, caching, OpenMetrics."""

from __future__ import annotations

from prometheus_client import CollectorRegistry
from prometheus_client.parser import text_string_to_metric_families

from agent.core.exporter import ExpositionCache, NpuwatchCollector
from agent.core.exposition import SnapshotRenderer
from agent.core.snapshot import SnapshotStore
from collectors.base import Sample
from collectors.catalogue import CATALOGUE


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
