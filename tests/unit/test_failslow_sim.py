"""The fail-slow scenario format (bench/failslow_scenario.py) and the simulator's physics (bench/failslow_sim.py)."""

from __future__ import annotations

import json
import sys
from typing import Any

import numpy as np
import pytest

from tests.support.paths import REPO

sys.path.insert(0, str(REPO))

from bench.failslow_scenario import ScenarioError, parse
from bench.failslow_sim import Simulation

BASE: dict[str, Any] = {"nodes": 2, "npus_per_node": 4, "tp": 4, "pp": 2, "dp": 1, "step_s": 1.0,
                        "duration_s": 300, "warmup_s": 0, "util_noise": 0.0, "step_jitter": 0.0,
                        "pfc_bursts_per_port_hour": 0}


def _sim(*events: dict[str, Any], **fields: Any) -> Simulation:
    return Simulation(parse({**BASE, **fields, "events": list(events)}))


@pytest.mark.parametrize(("change", "message"), [
    ({"dp": 2}, "tp x pp x dp must equal nodes x npus_per_node"),
    ({"nodes": 0}, "nodes: at least 1"),
    ({"step_s": "1"}, "step_s: a number is required"),
    ({"util_reads": 0}, "util_reads: at least 1"),
    ({"util_reads": 2.5}, "util_reads: an integer is required"),
    ({"colour": "red"}, "unknown fields: colour"),
    ({"events": [{"kind": "melt", "start": 0, "end": 1}]}, "events[0].kind: one of"),
    ({"events": [{"kind": "eval", "start": 5, "end": 5}]}, "events[0].end: after start"),
    ({"events": [{"kind": "compute_slow", "start": 0, "end": 9, "ranks": [8], "factor": 2}]}, "events[0].ranks"),
    ({"events": [{"kind": "link_slow", "start": 0, "end": 9, "pair": [1], "factor": 2}]}, "events[0].pair"),
    ({"events": [{"kind": "host_slow", "start": 0, "end": 9, "node": 2, "factor": 2}]}, "events[0].node"),
    ({"events": [{"kind": "host_slow", "start": 0, "end": 9, "node": 1, "factor": 0.5}]}, "events[0].factor"),
])
def test_a_bad_scenario_is_refused_naming_the_field(change: dict[str, Any], message: str) -> None:
    with pytest.raises(ScenarioError, match=message.replace("[", r"\[").replace("]", r"\]")):
        parse({**BASE, **change})


def test_a_compute_straggler_is_busy_while_its_peers_wait() -> None:
    sim = _sim({"kind": "compute_slow", "start": 100, "end": 200, "ranks": [1], "factor": 2.0}, pp_imbalance=0.0)
    before = [sim.busy(r, 50, 90) / 40 for r in range(8)]
    during = [sim.busy(r, 150, 190) / 40 for r in range(8)]
    assert max(before) - min(before) < 0.02 and before[0] == pytest.approx(0.7, abs=0.02)
    assert during[1] == pytest.approx(1.4 / 1.7, abs=0.03)  # 2 x 0.7 s of compute in a 1.7 s step
    assert all(during[r] == pytest.approx(0.7 / 1.7, abs=0.03) for r in range(8) if r != 1)


def test_the_last_pipeline_stage_is_busier_and_a_checkpoint_stops_every_rank() -> None:
    sim = _sim({"kind": "checkpoint", "start": 100, "end": 160}, pp_imbalance=0.2)
    assert sim.busy(4, 50, 90) > sim.busy(0, 50, 90) * 1.15  # ranks 4-7: stage 1 of 2
    assert all(sim.busy(r, 105, 155) == 0.0 for r in range(8))
    assert sim.host_cpu(0, 120) > 0.6 and sim.host_cpu(1, 120) > 0.6


def test_a_slow_link_pauses_its_first_ranks_port_and_slows_every_collective() -> None:
    sim = _sim({"kind": "link_slow", "start": 100, "end": 200, "pair": [2, 6], "factor": 2.0}, pp_imbalance=0.0)
    frames, retries = sim.pauses(2, 200)
    assert frames > 2.0 * 200 + 1000 and retries > 0
    assert sim.pauses(6, 200) == (2.0 * 200, 0.0)
    comm = sim.comm_time(200) - sim.comm_time(100)
    assert comm == pytest.approx(100 * 0.6 / 1.3, rel=0.05)  # 0.3 s collectives take 0.6 s of a 1.3 s step


def test_a_slow_host_starts_its_chips_late_and_saturates_its_cpu() -> None:
    sim = _sim({"kind": "host_slow", "start": 100, "end": 200, "node": 1, "factor": 1.5}, pp_imbalance=0.0)
    assert sim.busy(0, 150, 190) == pytest.approx(sim.busy(5, 150, 190), rel=0.05)  # same share of a step
    assert sim.host_cpu(1, 150) > 0.9 and sim.host_cpu(0, 150) < 0.6


def test_a_restart_removes_the_job_and_the_scrapes_keep_their_node_phase() -> None:
    sim = _sim({"kind": "restart", "start": 100, "end": 150})
    lines = list(sim.lines(0))
    info = [line for line in lines if line.startswith("npu_job_info")]
    stamps = sorted({int(line.rsplit(" ", 1)[1]) / 1000 for line in info})
    assert stamps and not [t for t in stamps if 100 <= t < 150]
    assert 'training_job="train-0",rank="5",local_rank="1",world_size="8"' in "\n".join(info)


def _samples_of_text(lines: list[str]) -> set[tuple[str, str, float, int]]:
    out = set()
    for line in lines:
        head, value, ms = line.rsplit(" ", 2)
        name, labels = head.split("{", 1)
        out.add((name, "{" + labels, float(value), int(ms)))
    return out


def _samples_of_json(lines: list[str]) -> set[tuple[str, str, float, int]]:
    out = set()
    for line in lines:
        series = json.loads(line)
        labels = dict(series["metric"])
        name = labels.pop("__name__")
        text = "{" + ",".join(f'{k}="{v}"' for k, v in labels.items()) + "}"
        out.update((name, text, float(v), ms) for v, ms in zip(series["values"], series["timestamps"]))
    return out


def test_the_json_import_lines_carry_the_samples_of_the_text_format() -> None:
    events = ({"kind": "link_slow", "start": 100, "end": 200, "pair": [2, 6], "factor": 2.0},
              {"kind": "restart", "start": 220, "end": 250})
    text = list(_sim(*events, pfc_bursts_per_port_hour=20, util_noise=0.03).lines(1_700_000_000))
    simulation = _sim(*events, pfc_bursts_per_port_hour=20, util_noise=0.03)
    lines = list(simulation.json_lines(1_700_000_000))
    assert _samples_of_json(lines) == _samples_of_text(text)
    assert simulation.written == len(text)


def _reading(reference: Simulation, rank: int, t: float, reads: int) -> float:
    """The exported busy fraction at t: the mean of ``reads`` readings 5 s / reads apart, the newest half a read
    before t (one read: at t), each the busy share of the 5 s before it."""
    shares = []
    for k in range(reads):
        at = max(0.0, t - (k + (0.5 if reads > 1 else 0.0)) * 5.0 / reads)
        shares.append(reference.busy(rank, max(0.0, at - 5), at) / 5 if at > 0 else 0.0)
    return sum(shares) / reads


@pytest.mark.parametrize("reads", [5, 1])
def test_the_streamed_readings_are_the_point_queries_whatever_the_chunk(reads: int) -> None:
    # the chunked, vectorised series against busy()/pauses() of the whole run, across chunk edges
    events = ({"kind": "checkpoint", "start": 100, "end": 130}, {"kind": "eval", "start": 150, "end": 190},
              {"kind": "compute_slow", "start": 200, "end": 260, "ranks": [3], "factor": 1.5},
              {"kind": "link_slow", "start": 40, "end": 90, "pair": [5, 1], "factor": 3.0})
    fields = {"warmup_s": 30, "step_jitter": 0.03, "pfc_bursts_per_port_hour": 30, "util_reads": reads}
    reference = _sim(*events, **fields)
    for chunk_s in (25.0, 1800.0):
        sim = Simulation(parse({**BASE, **fields, "events": list(events)}), chunk_s=chunk_s)
        checked = 0
        for chunk in sim.chunks():
            for node, npu in ((0, 3), (1, 1)):
                rank = node * 4 + npu
                for t, kept, util in zip(chunk.times[node], chunk.kept[node], chunk.util[node, npu]):
                    if kept and t > 0:
                        assert util == pytest.approx(_reading(reference, rank, t, reads), abs=1e-9)
                        frames = chunk.frames[node, npu][list(chunk.times[node]).index(t)]
                        assert frames == pytest.approx(reference.pauses(rank, t)[0], rel=1e-9)
                        checked += 1
        assert checked > 100


def test_node_base_renames_the_nodes_of_a_job_that_shares_a_store() -> None:
    simulation = Simulation(parse({**BASE, "events": []}), node_base=300)
    nodes = {json.loads(line)["metric"]["node"] for line in simulation.json_lines(0, ["npu_job_info"])}
    instances = {json.loads(line)["metric"]["instance"] for line in simulation.json_lines(0, ["npu_job_info"])}
    assert nodes == {"node-0300", "node-0301"} and instances == {"10.1.50.1:9101", "10.1.51.1:9101"}


def test_the_agents_reads_average_the_noise_of_one_reading() -> None:
    # a steady job: what varies between the chips' exported values is the readings' noise, util_noise / sqrt(reads)
    spread = {}
    for reads in (1, 5):
        sim = Simulation(parse({**BASE, "nodes": 8, "tp": 8, "dp": 4, "pp": 1, "duration_s": 600, "util_noise": 0.05,
                                "util_reads": reads, "events": []}))
        noise = []
        for chunk in sim.chunks():
            read = np.broadcast_to((chunk.kept & (chunk.times > 60))[:, None, :], chunk.util.shape)
            noise.append((chunk.util - chunk.busy)[read])
        values = np.concatenate(noise)
        spread[reads] = float(np.std(values))
    assert spread[1] == pytest.approx(0.05, rel=0.1)
    assert spread[5] == pytest.approx(0.05 / 5 ** 0.5, rel=0.1)
