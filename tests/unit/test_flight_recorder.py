"""Flight-recorder dump parser on synthetic torch_npu dumps, and the safe pickle reader.

FORMATS: tests/fixtures/flight_recorder/torch_npu_2.4_rank{0,1}.json follow torch_npu's ``dump_json``
(Ascend/pytorch torch_npu/csrc/distributed/TraceUtils.h: version "2.4", pg_status values as strings,
a missing time written 0, no frames, ``entries`` omitted when empty) and its flight-recorder test
(profiling_name "", process_group ("group_name_0", ""), timeout_ms 3636000, last_started -1 without
timing). No real torch_npu dump was available; the pickle twin is built here from the JSON the way
torch_npu's pickler lays it out (tuples for process_group and sizes, ints, None for a missing time,
frames added). Real PyTorch dumps (gloo) are exercised in test_flight_recorder_gloo.py.
"""

from __future__ import annotations

import json
import os
import pickle
from pathlib import Path
from typing import Any

import pytest

from collectors import flight_recorder
from collectors.base import ParseError
from collectors.flight_recorder import FrFrame, PgConfig, PgProgress
from tests.support import paths

FIXTURES = paths.FIXTURES / "flight_recorder"
FRAMES = [{"name": "all_reduce", "filename": "/usr/lib/python3.9/site-packages/torch/distributed/distributed_c10d.py",
           "line": 2501},
          {"name": "train_step", "filename": "/srv/job/train.py", "line": 211}]


def npu_json(rank: int) -> dict[str, Any]:
    document: dict[str, Any] = json.loads((FIXTURES / f"torch_npu_2.4_rank{rank}.json").read_text())
    return document


def as_npu_pickle(document: dict[str, Any]) -> bytes:
    """The pickle torch_npu's ``_dump_hccl_trace`` would write for the same state."""
    def entry(e: dict[str, Any]) -> dict[str, Any]:
        return {**e, "process_group": tuple(e["process_group"]),
                "input_sizes": tuple(tuple(s) for s in e["input_sizes"]),
                "output_sizes": tuple(tuple(s) for s in e["output_sizes"]),
                "time_discovered_started_ns": e["time_discovered_started_ns"] or None,
                "time_discovered_completed_ns": e["time_discovered_completed_ns"] or None,
                "frames": [dict(frame) for frame in FRAMES]}
    status = {pg: {key: int(value) for key, value in counters.items()}
              for pg, counters in document["pg_status"].items()}
    return pickle.dumps({**document, "pg_status": status, "entries": [entry(e) for e in document["entries"]]},
                        protocol=2)


def test_torch_npu_json_dump_of_the_rank_stuck_in_a_collective() -> None:
    dump = flight_recorder.parse_dump((FIXTURES / "torch_npu_2.4_rank0.json").read_bytes(), rank=0)
    assert (dump.rank, dump.version) == (0, "2.4")
    assert dump.pg_config == {
        "group_name_0": PgConfig(key="group_name_0", name="group_name_0", desc="", ranks=(0, 1)),
        "group_name_1": PgConfig(key="group_name_1", name="group_name_1", desc="", ranks=(0, 1)),
    }
    assert dump.progress == {
        0: PgProgress(pg_id=0, last_enqueued_seq=4, last_started_seq=None, last_completed_seq=3, source="pg_status"),
        1: PgProgress(pg_id=1, last_enqueued_seq=None, last_started_seq=None, last_completed_seq=None,
                      source="pg_status"),
    }
    assert [(e.collective_seq_id, e.state, e.is_p2p) for e in dump.entries] == [
        (1, "completed", False), (2, "completed", False), (3, "completed", False), (4, "scheduled", False),
        (0, "completed", True)]
    stuck = dump.entries[3]
    assert stuck.process_group == ("group_name_0", "")
    assert (stuck.profiling_name, stuck.collective) == ("", None)  # no profiling name, and JSON has no frames
    assert (stuck.input_sizes, stuck.input_dtypes, stuck.timeout_ms) == (((4096, 1024),), ("BFloat16",), 3636000)
    assert (stuck.time_discovered_started_ns, stuck.time_discovered_completed_ns) == (None, None)
    assert stuck.time_created_ns == 1768360804000000000
    assert dump.entries[2].time_discovered_completed_ns == 1768360803009000000


def test_progress_from_entries_ignores_point_to_point() -> None:
    dump = flight_recorder.parse_dump((FIXTURES / "torch_npu_2.4_rank0.json").read_bytes())
    assert dump.progress_from_entries() == {
        0: PgProgress(pg_id=0, last_enqueued_seq=4, last_started_seq=3, last_completed_seq=3, source="entries")}


def test_the_lagging_rank_is_behind_at_the_same_sequence_number() -> None:
    stuck, lagging = (flight_recorder.parse_dump(json.dumps(npu_json(rank)).encode(), rank) for rank in (0, 1))
    assert lagging.progress[0].last_enqueued_seq == 3 < stuck.progress[0].last_enqueued_seq == 4
    assert lagging.collectives_at(0, 4) == ()
    assert [e.record_id for e in stuck.collectives_at(0, 4)] == [3]


def test_pickle_twin_parses_to_the_same_records_plus_frames() -> None:
    from_json = flight_recorder.parse_dump(json.dumps(npu_json(0)).encode(), rank=0)
    from_pickle = flight_recorder.parse_dump(as_npu_pickle(npu_json(0)), rank=0)
    assert (from_pickle.version, from_pickle.pg_config, from_pickle.pg_status) == (
        from_json.version, from_json.pg_config, from_json.pg_status)
    assert [e.__class__(**{**e.__dict__, "frames": ()}) for e in from_pickle.entries] == list(from_json.entries)
    assert from_pickle.entries[3].frames == (
        FrFrame("all_reduce", FRAMES[0]["filename"], 2501), FrFrame("train_step", "/srv/job/train.py", 211))
    assert from_pickle.entries[3].collective == "all_reduce"  # torch_npu: the first frame names the op


def test_entries_are_optional_and_json_may_omit_them() -> None:
    document = npu_json(1)
    del document["entries"]
    dump = flight_recorder.parse_dump(json.dumps(document).encode())
    assert dump.entries == ()
    assert dump.progress[0].last_enqueued_seq == 3


@pytest.mark.parametrize(("name", "rank"), [
    ("nccl_trace_rank_3", 3), ("/tmp/12", 12), ("trace_7.json", 7), ("hccl_trace_rank_0.pkl", 0), ("dump", None)])
def test_rank_from_filename(name: str, rank: int | None) -> None:
    assert flight_recorder.rank_from_filename(name) == rank


def test_load_dump_takes_the_rank_from_the_file_name(tmp_path: Path) -> None:
    path = tmp_path / "hccl_trace_rank_1"
    path.write_bytes(as_npu_pickle(npu_json(1)))
    assert flight_recorder.load_dump(path).rank == 1
    assert flight_recorder.load_dump(path, rank=9).rank == 9
    with pytest.raises(ParseError, match="larger than the 100-byte limit"):
        flight_recorder.load_dump(path, max_bytes=100)
    with pytest.raises(ParseError, match="over the 100-byte limit"):
        flight_recorder.parse_dump(path.read_bytes(), max_bytes=100)


# --- structure errors -----------------------------------------------------------------------------------


def _with_entry(**changes: object) -> bytes:
    document = npu_json(0)
    document["entries"][0].update(changes)
    document["entries"][0] = {k: v for k, v in document["entries"][0].items() if v is not _DROP}
    return json.dumps(document).encode()


_DROP = object()


@pytest.mark.parametrize(("data", "message"), [
    (b"", "neither JSON nor a pickle"),
    (b"hello", "neither JSON nor a pickle"),
    (b"{broken", "not valid JSON"),
    (b"\x80\x02}q\x00(X", "pickle"),
    (b'{"pg_config": {}}', "missing 'version'"),
    (b'{"version": "2.5", "entries": {}}', "entries: expected a list"),
    (b'{"version": "2.5", "pg_status": {"x": {}}}', r"pg_status\['x'\]: 'x' is not an integer"),
    (b'{"version": "2.5", "pg_status": {"0": {"last_enqueued_collective": 1}}}', "missing 'last_started"),
    (_with_entry(collective_seq_id="five"), r"entries\[0\].collective_seq_id: 'five' is not an integer"),
    (_with_entry(state=_DROP), r"entries\[0\]: missing 'state'"),
    (_with_entry(process_group=["only-a-name"]), r"expected \(name, desc\)"),
    (_with_entry(is_p2p="no"), "expected true/false"),
    (_with_entry(input_sizes=[["4096"], [1.5]]), r"input_sizes\[1\]: 1.5 is not an integer"),
    (_with_entry(duration_ms="fast"), "duration_ms: 'fast' is not a number"),
], ids=lambda value: value if isinstance(value, str) else "data")
def test_malformed_dumps_are_parse_errors(data: bytes, message: str) -> None:
    with pytest.raises(ParseError, match=message):
        flight_recorder.parse_dump(data)


def test_unknown_state_and_extra_keys_are_kept_or_ignored() -> None:
    dump = flight_recorder.parse_dump(_with_entry(state="aborted", thread_name="pt_main", new_field={"x": 1}))
    assert dump.entries[0].state == "aborted"


def test_ranks_text_that_is_not_a_plain_list_gives_none() -> None:
    document = {"version": "2.5", "pg_config": {"0": {"name": "0", "desc": "default_pg", "ranks": "all"}}}
    dump = flight_recorder.parse_dump(json.dumps(document).encode())
    assert dump.pg_config["0"].ranks is None


# --- the safe pickle reader -------------------------------------------------------------------------------


class _Exploit:
    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple[Any, tuple[str]]:
        return (os.system, (f"touch {self.marker}",))


def test_a_pickle_that_would_run_a_command_is_refused_without_running_it(tmp_path: Path) -> None:
    marker = tmp_path / "pwned"
    payload = pickle.dumps({"version": "2.5", "entries": [_Exploit(marker)]}, protocol=2)
    with pytest.raises(ParseError, match="GLOBAL"):
        flight_recorder.parse_dump(payload)
    assert not marker.exists()
    # The same payload is harmful: a plain pickle.loads would have created the marker.
    assert b"system" in payload


def test_the_unpickler_alone_refuses_globals(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Second layer: with the opcode scan switched off, find_class still resolves nothing."""
    marker = tmp_path / "pwned"
    monkeypatch.setattr(flight_recorder, "_check_opcodes", lambda data: None)
    for protocol in (0, 2, 4):
        with pytest.raises(ParseError, match="refused"):
            flight_recorder.safe_unpickle(pickle.dumps(_Exploit(marker), protocol=protocol))
    assert not marker.exists()


@pytest.mark.parametrize(("value", "message"), [
    ({1, 2}, "EMPTY_SET|ADDITEMS"),
    (frozenset({1}), "FROZENSET|GLOBAL"),
    (bytearray(b"x"), "BYTEARRAY8|GLOBAL"),
    (complex(1, 2), "GLOBAL"),
])
def test_non_plain_values_are_refused(value: object, message: str) -> None:
    with pytest.raises(ParseError, match=message):
        flight_recorder.safe_unpickle(pickle.dumps(value, protocol=4))


def test_cycles_and_deep_nesting_are_refused_but_shared_dicts_are_fine() -> None:
    cyclic: list[object] = []
    cyclic.append(cyclic)
    with pytest.raises(ParseError, match="cycle"):
        flight_recorder.safe_unpickle(pickle.dumps(cyclic, protocol=2))
    deep: list[object] = []
    for _ in range(40):
        deep = [deep]
    with pytest.raises(ParseError, match="deeper than 32"):
        flight_recorder.safe_unpickle(pickle.dumps(deep, protocol=2))
    with pytest.raises(ParseError, match="deeper than 32"):
        flight_recorder.parse_dump(json.dumps({"version": "2.5", "x": deep}).encode())
    with pytest.raises(ParseError, match="not valid JSON"):
        flight_recorder.parse_dump(b'{"version": "2.5", "x": ' + b"[" * 200_000 + b"]" * 200_000 + b"}")
    frame = {"name": "f", "filename": "a.py", "line": 1}
    shared = {"version": "2.5", "entries": [{"frames": [frame]}, {"frames": [frame]}]}
    assert flight_recorder.safe_unpickle(pickle.dumps(shared, protocol=2)) == shared
    # A DAG that doubles at every level: measured once per node, not once per path.
    wide: list[object] = []
    for _ in range(30):
        wide = [wide, wide]
    result = flight_recorder.safe_unpickle(pickle.dumps(wide, protocol=2))
    assert isinstance(result, list) and len(result) == 2 and result[0] is result[1]
