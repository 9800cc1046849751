"""Real flight-recorder dumps from a 4-rank gloo job (tests/support/fr_harness.py), parsed by our readers.

Each scenario runs once per module (about 9-14 s each on two idle cores). What torch 2.13 + gloo writes,
as observed here: version "2.10", profiling names ``gloo:<op>``, every entry ``scheduled`` and
``retired`` whatever happened, ``last_started_collective`` -1, and ``last_completed_collective``
racing the dump: it lagged behind a collective that had already returned (3 of 5 in a clean run) and
another time counted one that had timed out. So the assertions compare ``last_enqueued_seq`` and the
entries, never the completed counter.
"""

from __future__ import annotations

import dataclasses
import importlib.util

import pytest

from collectors import flight_recorder
from collectors.flight_recorder import RankDump

pytestmark = pytest.mark.slow

if importlib.util.find_spec("torch") is None:
    pytest.skip("torch is not installed", allow_module_level=True)

from tests.support import fr_harness  # noqa: E402
from tests.support.fr_harness import ScenarioRun  # noqa: E402

N = fr_harness.COLLECTIVES
PG = 0  # the default group


@pytest.fixture(scope="module", params=fr_harness.SCENARIOS)
def run(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> ScenarioRun:
    scenario: str = request.param
    return fr_harness.run_scenario(scenario, tmp_path_factory.mktemp(scenario))


def dumps(run: ScenarioRun, kind: str = "pickle") -> list[RankDump]:
    paths = [run.pickle_dump(r) if kind == "pickle" else run.json_dump(r) for r in range(run.world_size)]
    missing = [str(path) for path in paths if not path.is_file()]
    assert missing == [], f"{run.scenario}: no dump from some ranks; log of rank 0:\n{run.log(0)}"
    return [flight_recorder.load_dump(path) for path in paths]


def test_every_rank_exits_and_dumps_json_and_pickle_that_agree(run: ScenarioRun) -> None:
    assert run.returncodes == (0,) * run.world_size, [run.log(r) for r in range(run.world_size)]
    pickles, jsons = dumps(run, "pickle"), dumps(run, "json")
    for from_pickle, from_json in ((pickles[rank], jsons[rank]) for rank in range(run.world_size)):
        assert from_pickle.rank == from_json.rank
        assert (from_pickle.version, from_pickle.pg_config) == (from_json.version, from_json.pg_config)
        # The JSON dump is taken first; gloo may retire a collective before the pickle is taken, so the
        # completed counter and 'retired' are left out of the comparison.
        assert {pg: (p.last_enqueued_seq, p.last_started_seq) for pg, p in from_pickle.pg_status.items()} == {
            pg: (p.last_enqueued_seq, p.last_started_seq) for pg, p in from_json.pg_status.items()}
        assert [dataclasses.replace(e, frames=(), retired=None) for e in from_pickle.entries] == [
            dataclasses.replace(e, retired=None) for e in from_json.entries]
        assert all(e.frames for e in from_pickle.entries)  # only the pickle carries stacks
        assert all(e.timeout_ms == run.pg_timeout_ms for e in from_pickle.entries)
        assert {config.ranks for config in from_pickle.pg_config.values()} == {tuple(range(run.world_size))}


def test_scenario_outcome(run: ScenarioRun) -> None:
    ranks = dumps(run)
    seen = {dump.rank: [(e.collective_seq_id, e.profiling_name) for e in dump.entries] for dump in ranks}
    print(f"{run.scenario}: errors={run.errors} entries={seen}")  # shown by pytest when an assertion fails
    faulty = ranks[run.faulty_rank]
    healthy = [dump for dump in ranks if dump.rank != run.faulty_rank]
    if run.scenario == "complete":
        assert run.errors == (None,) * run.world_size
        for dump in ranks:
            assert dump.progress[PG].last_enqueued_seq == N
            assert [e.profiling_name for e in dump.entries] == ["gloo:all_reduce"] * N
            assert [e.collective_seq_id for e in dump.entries] == list(range(1, N + 1))
    elif run.scenario == "hang":
        # The sleeping rank never enqueued collective N; the others did, and timed out in it.
        assert run.errors[run.faulty_rank] is None
        assert all("Timed out" in (error or "") for error in run.errors[:run.faulty_rank])
        assert faulty.progress[PG].last_enqueued_seq == N - 1
        assert all(dump.progress[PG].last_enqueued_seq == N for dump in healthy)
        assert faulty.collectives_at(PG, N) == ()
        assert all([e.collective for e in dump.collectives_at(PG, N)] == ["all_reduce"] for dump in healthy)
    else:
        # Everyone reached collective N, but the last rank called a different one.
        # The first rank to time out exits, so a peer still waiting may see its connection close instead.
        assert all(any(word in (error or "") for word in ("Timed out", "Connection closed by peer"))
                   for error in run.errors)
        assert any("Timed out" in (error or "") for error in run.errors)
        assert all(dump.progress[PG].last_enqueued_seq == N for dump in ranks)
        names = {dump.rank: [e.profiling_name for e in dump.collectives_at(PG, N)] for dump in ranks}
        assert names == {r: ["gloo:all_reduce"] for r in range(run.faulty_rank)} | {
            run.faulty_rank: ["gloo:broadcast"]}
        assert all([e.profiling_name for e in dump.collectives_at(PG, N - 1)] == ["gloo:all_reduce"]
                   for dump in ranks)
