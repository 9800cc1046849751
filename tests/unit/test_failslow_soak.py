"""The fail-slow soak's pure parts (bench/failslow_soak.py): the healthy jobs it draws and the bound it prints."""

from __future__ import annotations

import random
import sys

import pytest

from tests.support.paths import REPO

sys.path.insert(0, str(REPO))

from bench.failslow_scenario import FAULTS, parse
from bench.failslow_soak import DAY_S, plan, poisson, shape, upper_bound


# chi-squared(0.95, 2k + 2) / 2
@pytest.mark.parametrize(("pages", "bound"), [(0, 2.9957), (1, 4.7439), (2, 6.2958), (10, 16.9622)])
def test_the_bound_is_poissons_one_sided_95_percent(pages: int, bound: float) -> None:
    assert upper_bound(pages, 1.0) == pytest.approx(bound, abs=1e-3)
    assert upper_bound(pages, 1000.0) == pytest.approx(upper_bound(pages, 1.0) / 1000.0, rel=1e-9)


def test_the_plan_runs_the_node_days_asked_for_in_healthy_megatron_jobs() -> None:
    batches = plan(60.0, 6.0, 25.0, seed=5, npus=[8, 16], ranks=[128, 256, 512, 1024])
    documents = [d for batch in batches for d in batch]
    node_days = sum(d["nodes"] * d["duration_s"] / DAY_S for d in documents)
    assert 60.0 <= node_days < 60.0 + 128 * 0.25  # the last job may overshoot by one job
    sizes = [sum(d["nodes"] * 0.25 for d in batch) for batch in batches]
    assert len(batches) >= 2 and all(size >= 25.0 for size in sizes[:-1])
    assert len({d["job"] for d in documents}) == len(documents)
    assert {d["npus_per_node"] for d in documents} == {8, 16}
    for document in documents:
        scenario = parse(document)
        assert scenario.ranks in (128, 256, 512, 1024)
        assert all(e.kind not in FAULTS for e in scenario.events)
        # every node's chips in one pipeline stage
        assert all(len({scenario.stage_of(r) for r in range(n * scenario.npus_per_node,
                                                             (n + 1) * scenario.npus_per_node)}) == 1
                   for n in range(scenario.nodes))
        spans = sorted((e.start, e.end) for e in scenario.events)
        assert all(b[0] >= a[1] + 30 for a, b in zip(spans, spans[1:]))  # decoys apart
        checkpoints = [e for e in scenario.events if e.kind == "checkpoint"]
        assert 4 <= len(checkpoints) <= 12  # every 30-60 minutes over 6 hours (one may not fit)
    assert any(e.kind == "eval" for d in documents for e in parse(d).events)
    assert plan(60.0, 6.0, 25.0, seed=5, npus=[8, 16], ranks=[128, 256, 512, 1024]) == batches


def test_restarts_come_at_their_rate() -> None:
    rng = random.Random(3)
    counts = [poisson(rng, 0.5) for _ in range(20_000)]
    assert sum(counts) / len(counts) == pytest.approx(0.5, abs=0.02)
    assert counts.count(0) / len(counts) == pytest.approx(0.6065, abs=0.015)


def test_every_shape_drawn_keeps_a_nodes_chips_in_one_pipeline_stage() -> None:
    rng = random.Random(1)
    seen = set()
    for _ in range(500):
        layout = shape(rng, [8, 16], [128, 256, 512, 1024])
        ranks = layout["nodes"] * layout["npus_per_node"]
        assert layout["tp"] * layout["pp"] * layout["dp"] == ranks
        assert (layout["tp"] * layout["dp"]) % layout["npus_per_node"] == 0  # stage_of: rank // (tp x dp)
        seen.add((layout["npus_per_node"], ranks, layout["pp"]))
    assert {pp for _, _, pp in seen} == {1, 2, 4, 8} and {r for _, r, _ in seen} == {128, 256, 512, 1024}


def test_a_replay_that_lost_results_is_told_from_a_clean_one() -> None:
    from bench.failslow import replay_errors

    banner = ("Replay mode:\nfrom: \t2023-11-14 22:13:20 +0000 UTC \nmax data points per request: 1000\n\n"
              'Group "npuwatch-failslow"\ninterval: \t10s\n> Rule "npuwatch:npu_roce_pause_frames:irate" (ID: 1)\n')
    lost = ("2026-12-07T12:49:50.450Z\terror\tVictoriaMetrics/app/vmalert/remotewrite/remotewrite.go:229\t"
            "all 5 attempts to send request failed - dropping 2431 time series")
    assert replay_errors(banner) == []
    assert replay_errors(banner + lost + "\n") == [lost]


def test_the_store_takes_a_replay_request_of_the_biggest_batch() -> None:
    from bench.failslow import STORE_FLAGS

    limit = next(int(flag.split("=", 1)[1]) for flag in STORE_FLAGS if flag.startswith("-maxInsertRequestSize="))
    # a rule's result of one range query: 1,000 points a series, 18 kB a chip as vmalert 1.79 writes it (a
    # 2,431-chip batch sent 44 MB); a soak batch stays under 100 nodes until its last job (up to 128 nodes) of
    # up to 16 chips: 3,632 chips at most
    assert limit > 3632 * 18_200
