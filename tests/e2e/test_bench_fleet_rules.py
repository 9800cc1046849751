"""``bench/fleet_rules.py --quick``: the fleet-wide rule groups on a 64-node synthetic fleet written by remote
write into real Prometheus shards and a real VictoriaMetrics + vmalert per shard; every fleet-wide group timed,
every per-node group timed on each of the two shards, the fail-slow groups (alerts/failslow.rules.yml) on the
first shard once it holds its nodes' fail-slow series, the culprit named."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.support.paths import REPO

pytestmark = pytest.mark.slow

FLEET_GROUPS = ("triage: incident", "triage: culprit", "probes: medians", "probes: alerts")
NODE_GROUPS = ("triage: node faults", "triage: node answers", "probes: node medians, slow chips")
SHARDS = ("node, shard 0 of 2", "node, shard 1 of 2")
FAILSLOW_GROUPS = ("fail-slow: jobs and ranks", "fail-slow: compute, host", "fail-slow: links")
FAILSLOW = "fail-slow, shard 0 of 2"


def test_the_benchmark_times_every_fleet_group_on_both_engines() -> None:
    result = subprocess.run([sys.executable, str(REPO / "bench" / "fleet_rules.py"), "--quick"], cwd=REPO,
                            capture_output=True, text=True, timeout=600, check=False)
    rows = [[cell.strip() for cell in line.split("|")] for line in result.stdout.splitlines()
            if "|" in line and not line.startswith(("nodes", "-"))]
    assert len(rows) == 2 * (len(FLEET_GROUPS) + len(SHARDS) * len(NODE_GROUPS) + len(FAILSLOW_GROUPS)), (
        result.stdout + result.stderr[-3000:])
    for engine in ("Prometheus 2.42", "VictoriaMetrics 1.79 + vmalert"):
        mine = {(row[3], row[4]): row for row in rows if row[2] == engine}
        assert set(mine) == ({("fleet", g) for g in FLEET_GROUPS} | {(s, g) for s in SHARDS for g in NODE_GROUPS}
                             | {(FAILSLOW, g) for g in FAILSLOW_GROUPS}), sorted(mine)
        for (tier, _), row in mine.items():
            assert row[5].endswith(")") and "none ended" not in row[5], row
            assert row[6] == ("yes (< 5 s)" if tier.startswith("node") else "yes (< 2 s)"), row
            assert row[9] == "yes", row  # hccl:culprit:info names the hung job's culprit
            # the fleet ruler gets a few series per node, not the 8,510 written
            assert 0 < int(row[8].split()[0]) < 1000, row
            culprit_s, alert_s = (float(part.strip().rstrip(" s")) for part in row[10].split("/"))
            assert 0 <= culprit_s < alert_s, row  # HCCLCulpritSuspected fires after its for: of 1m
    # 64 nodes evaluate far under the targets: the exit status says every group did
    assert result.returncode == 0, result.stdout + result.stderr[-3000:]
