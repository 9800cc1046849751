"""The log reader: the byte prefilter loses nothing, chunking changes nothing, corpus shapes become evidence."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agent.triage import logs
from agent.triage.evidence import Evidence
from agent.triage.logs import LogReader, candidate_lines, read_stream
from tests.support.paths import CORPUS
from tests.support.triage_scenarios import T0, Cluster

_LINES = st.sampled_from([
    b"[INFO] HCCL(1,p):2025-10-24-10:00:00.000.000 [a.cc:1] noise",
    b"[DEBUG] HCCL(1,p):2025-10-24-10:00:00.000.000 [a.cc:1] noise",
    b"[INFO] HCCL(1,p):2025-10-24-10:00:00.000.000 [a.cc:1] Entry-HcclAllReduce: tag[AllReduce_G]",
    b"[INFO] HCCL(1,p):2025-10-24-10:00:00.000.000 crimer rank [1.2.3.4/2] status[LOST]",
    b"[INFO] x ankNum[8], rank[1] Key Info]",
    b"[ERROR] HCCL(1,p):2025-10-24-10:00:00.000.000 [t.cc:9] Task run failed",
    b"EI0002: [PID: 1] 2025-10-24-10:00:01.000.000 The wait execution of the Notify register times out.",
    b"    continuation of a block",
    b"",
    b"[INFO]",
    b"plain job output [rank3]: loss 1.23",
])


def naive(data: bytes) -> list[tuple[int, bytes]]:
    """Every line the two parsers could care about, found line by line."""
    found = []
    for number, line in enumerate(data.split(b"\n"), start=1):
        if not line:
            continue
        quiet = line.startswith((b"[INFO]", b"[DEBUG]", b"[EVENT]", b"[TRACE]"))
        if not quiet or any(token in line for token in (b"Entry-Hccl", b"ankNum[", b"Key Info]", b"crimer")):
            found.append((number, line))
    return found


@settings(max_examples=300, deadline=None)
@given(st.lists(_LINES, max_size=60), st.booleans())
def test_prefilter_keeps_exactly_the_lines_a_parser_may_need(lines: list[bytes], trailing: bool) -> None:
    data = b"\n".join(lines) + (b"\n" if trailing and lines else b"")
    found, total = candidate_lines(data, 1)
    assert found == naive(data)
    assert total == (data.count(b"\n") + (0 if not data or data.endswith(b"\n") else 1))


def _evidence(data: bytes, name: str, *, prefilter: bool = True) -> Evidence:
    reader = LogReader("n", name, T0)
    if prefilter:
        read_stream(io.BytesIO(data).read, reader)
    else:
        for number, line in enumerate(data.decode("utf-8", "replace").split("\n"), start=1):
            if line:
                reader.feed(number, line)
    return reader.finish()


def _corpus_logs() -> list[Path]:
    return sorted((CORPUS / "logs").glob("*.log")) if (CORPUS / "logs").is_dir() else []


@pytest.mark.parametrize("path", _corpus_logs(), ids=lambda p: p.name)
def test_prefilter_and_chunks_change_nothing_on_the_corpus(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    data = path.read_bytes()
    whole = _evidence(data, path.name, prefilter=False)
    assert _evidence(data, path.name) == whole
    monkeypatch.setattr(logs, "CHUNK_BYTES", 61)
    assert _evidence(data, path.name) == whole


def test_corpus_is_present_for_the_conformance_run() -> None:
    if not (CORPUS / "logs").is_dir():
        pytest.skip("no shared corpus here")
    assert len(_corpus_logs()) > 20


def test_prefilter_and_chunks_change_nothing_on_a_scenario(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cluster = Cluster(tmp_path, nodes=1).write()
    cluster.timeouts([0, 1, 2], T0, peers=[("29.1.3.13", 3)], state="lost")
    cluster.cqe(1, T0 - 10, "29.1.3.13")
    for rank in range(4):
        data = cluster.run_plog(rank).read_bytes() + (cluster.debug_plog(rank).read_bytes()
                                                      if cluster.debug_plog(rank).exists() else b"")
        whole = _evidence(data, "x")
        assert whole == _evidence(data, "x", prefilter=False)
        monkeypatch.setattr(logs, "CHUNK_BYTES", 97)
        assert _evidence(data, "x") == whole
        monkeypatch.undo()


def test_corpus_shapes_become_evidence() -> None:
    if not (CORPUS / "logs").is_dir():
        pytest.skip("no shared corpus here")
    heartbeat = _evidence((CORPUS / "logs" / "02_doc_heartbeat_lost_and_stuck.log").read_bytes(), "hb")
    # a Stuck Occurred location lists abnormal devices (IP/device), not ranks
    assert [(b.how, b.ip, b.rank, b.device) for b in heartbeat.blames] == [
        ("lost", "127.10.0.2", 2, None), ("lost", "127.10.0.1", 1, None), ("stuck", "127.10.0.1", None, 1)]
    mismatch = _evidence((CORPUS / "logs" / "32_doc_ei0002_two_ranks_allreduce_vs_allgather_op_mismatch.log")
                         .read_bytes(), "op")
    assert [(f.comm, f.rank, f.op, f.index) for f in mismatch.failures] == [
        ("127.10.0.1%enp_60000_0_1761275812718970", 0, "AllReduce", 21),
        ("127.10.0.1%enp_60000_0_1761275812718970", 1, "AllGather", 21)]
    root = _evidence((CORPUS / "logs" / "36_doc_ei0015_root_server_topo_exchange_timeout_connected_4_of_8.log")
                     .read_bytes(), "ei15")
    assert sorted({b.rank for b in root.blames if b.how == "missing"}) == [1, 3, 5, 7]
    assert {f.code for f in root.failures} >= {"EI0015"}
    cqe = _evidence((CORPUS / "logs" / "03_doc_ei0013_error_cqe_screen_and_plog.log").read_bytes(), "cqe")
    assert [f.kind for f in cqe.faults] == ["roce_cqe"]
    assert any(b.how == "cqe" for b in cqe.blames)
    kernel = _evidence((CORPUS / "logs" / "23_mc_fixture_dmesg_drv_heartbeat_lost.log").read_bytes(), "dmesg")
    assert [(f.kind, f.npu) for f in kernel.faults] == [("device_lost", 1)]
    entries = _evidence((CORPUS / "logs" / "35_doc_hccl_entry_log_enable_allreduce_on_two_streams.log")
                        .read_bytes(), "entries")
    assert [(p.comm, p.rank, p.ops) for p in entries.progress] == [("127.10.0.1%eth_60000_0_1741318944927847", 0, 2)]


def test_a_failure_block_takes_the_ascend_code_printed_near_it() -> None:
    data = (b"[ERROR] HCCL(7,p):2025-10-24-10:00:00.000.000 [t.cc:9] [7][TaskExecStage][Timeout][Host]Task run "
            b"failed, base information is streamID:[2], taskID[21], tag[AllReduce_G], AlgType(level 0-1-2):[x].\n"
            b"[ERROR] HCCL(7,p):2025-10-24-10:00:00.000.010 [t.cc:9] [7][TaskExecStage][Timeout][Host]Task run "
            b"failed, groupRank information is group:[G], user define information[], rankSize[8], rankId[3].\n"
            b"EI0002: [PID: 7] 2025-10-24-10:00:01.000.000 The wait execution of the Notify register times out.\n")
    (failure,) = _evidence(data, "x").failures
    assert (failure.code, failure.comm, failure.rank, failure.rank_size, failure.op) == ("EI0002", "G", 3, 8,
                                                                                        "AllReduce")
