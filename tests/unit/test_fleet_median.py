"""How far the GEMM fleet median can be from the median over every chip.

alerts/probes-shard.rules.yml records each node's median chip per model and dtype; alerts/probes-fleet.rules.yml
takes the fleet median over those (one series per node reaches the global, not one per chip). That is not the
median of every chip: these tests bound the difference, in rank for any fleet and in value for fleets shaped
like real ones (docs/fleet-scale.md#the-fleet-median quotes them). ``quantile`` is PromQL's (linear
interpolation between the closest ranks), and alerts/tests/probes-test.yml pins the rules to it.
"""

from __future__ import annotations

import random
from collections.abc import Sequence

import pytest

CHIPS = 16


def quantile(q: float, values: Sequence[float]) -> float:
    """PromQL's ``quantile``: rank ``q * (n - 1)``, linear between its neighbours."""
    ordered = sorted(values)
    rank = q * (len(ordered) - 1)
    low = int(rank)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


def fleet_median(nodes: Sequence[Sequence[float]]) -> float:
    """What the rules record: the median over the nodes' medians."""
    return quantile(0.5, [quantile(0.5, chips) for chips in nodes])


def chips_median(nodes: Sequence[Sequence[float]]) -> float:
    return quantile(0.5, [value for chips in nodes for value in chips])


def realistic_fleet(rng: random.Random, nodes: int, slow_nodes: float, slow_chips: float) -> list[list[float]]:
    """Chips within a few percent of each other (run-to-run noise 2 %, a node's cooling and clocks 1 %), a
    share of nodes 20 % slow as a whole (a bad driver on them) and of chips 30 % slow (a sick chip)."""
    fleet = []
    for _ in range(nodes):
        node = rng.gauss(1.0, 0.01) * (0.8 if rng.random() < slow_nodes else 1.0)
        fleet.append([node * rng.gauss(1.0, 0.02) * (0.7 if rng.random() < slow_chips else 1.0)
                      for _ in range(CHIPS)])
    return fleet


@pytest.mark.parametrize("seed", range(40))
def test_the_median_of_node_medians_is_within_the_middle_half_of_the_chips(seed: int) -> None:
    """Any fleet, even one built to skew it: at least half of the nodes have half of their chips at or
    below it, and as many at or above, so at least a quarter of all chips (less a node's worth) lie on
    each side."""
    rng = random.Random(seed)
    nodes = rng.randint(3, 60)
    fleet = [[rng.choice([rng.random(), rng.random() * 10, 5.0]) for _ in range(CHIPS)] for _ in range(nodes)]
    if seed % 2:  # skewed: half of the nodes' chips split into a fast and a slow half
        fleet = [sorted(chips)[:CHIPS // 2] * 2 if i % 2 else chips for i, chips in enumerate(fleet)]
    median = fleet_median(fleet)
    chips = [value for node in fleet for value in node]
    floor = len(chips) / 4 - CHIPS
    assert sum(value <= median for value in chips) >= floor
    assert sum(value >= median for value in chips) >= floor


@pytest.mark.parametrize(("slow_nodes", "slow_chips", "bound"),
                         [(0.0, 0.0, 0.002), (0.02, 0.01, 0.002), (0.05, 0.05, 0.002), (0.2, 0.1, 0.01)])
def test_on_fleets_shaped_like_real_ones_it_is_within_a_percent(slow_nodes: float, slow_chips: float,
                                                                 bound: float) -> None:
    """1,000 nodes of 16 chips: the two medians differ by under 0.2 % while up to 5 % of the nodes or chips
    are slow, under 1 % with a fifth of the nodes slow; far inside the 15 % (0.85 of the median) and 20 %
    (0.8 of peak) margins the alerts use."""
    worst = 0.0
    for seed in range(5):
        fleet = realistic_fleet(random.Random(seed), 1000, slow_nodes, slow_chips)
        worst = max(worst, abs(fleet_median(fleet) / chips_median(fleet) - 1))
    assert worst < bound, worst


def test_a_chip_at_084_of_the_median_is_slow_by_both_medians() -> None:
    fleet = realistic_fleet(random.Random(7), 1000, 0.02, 0.01)
    true = chips_median(fleet)
    fleet[3][5] = 0.84 * true
    assert fleet[3][5] / fleet_median(fleet) < 0.85
    fleet[3][5] = 0.86 * true
    assert fleet[3][5] / fleet_median(fleet) >= 0.85


def test_two_nodes_are_where_it_is_furthest_off() -> None:
    """A fleet of two nodes, one with a slow half: the nodes' medians average the fast and the mixed node."""
    fleet = [[1.0] * CHIPS, [1.0] * (CHIPS // 2) + [0.5] * (CHIPS // 2)]
    assert chips_median(fleet) == 1.0
    assert fleet_median(fleet) == pytest.approx(0.875)
