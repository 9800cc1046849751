"""``npuwatch demo fleet hccl-hang``: one coordinated HCCL hang over several demo nodes, whose logs
the scanner turns into the incident series that name the culprit (agent.demo.fleet)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agent.cli import main
from agent.demo.fleet import culprit_index
from agent.demo.node import DemoNode
from collectors.base import Sample
from collectors.hccl.collector import HcclLogCollector
from collectors.hccl.tail import DEFAULT_GLOBS

T0 = 1_760_000_000.0


def make_fleet(tmp_path: Path, count: int = 4, chips: int = 2) -> list[Path]:
    dirs = [tmp_path / f"node-{index}" for index in range(1, count + 1)]
    for directory in dirs:
        DemoNode(directory).create(chips=chips)
    return dirs


def fleet(*args: str) -> int:
    return main(["demo", "fleet", "hccl-hang", *args])


def scan(directory: Path, now: float) -> list[Sample]:
    """What the demo agent's scanner exports for the node: the CANN layout and the job's stderr log."""
    logs = HcclLogCollector(paths=[directory / "log"], globs=[*DEFAULT_GLOBS, "job/*.log"],
                            state_file=directory / "scan-state.json", clock=lambda: now)
    return logs.collect()


def rows(samples: list[Sample], metric: str) -> list[dict[str, str]]:
    return sorted((dict(s.labels) for s in samples if s.metric == metric), key=lambda r: sorted(r.items()))


def test_the_hang_logs_every_victim_blaming_the_silent_culprit(tmp_path: Path,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    dirs = make_fleet(tmp_path)
    assert fleet("--culprit", "node-3", "--npu", "1", "--time", str(T0), *map(str, dirs)) == 0
    summary = json.loads(capsys.readouterr().out)
    comm = summary["comm"]
    assert summary["rank_size"] == 8
    assert summary["culprit"] == {"dir": str(dirs[2]), "node": "node-3", "npu": 1, "rank": 5,
                                  "device_ip": "29.3.1.11", "fault": "link_down"}
    assert [node["timed_out_ranks"] for node in summary["nodes"]] == [[0, 1], [2, 3], [4], [6, 7]]
    assert [node["job_log"] for node in summary["nodes"]] == [str(d / "log" / "job" / "train.log") for d in dirs]

    timeouts, blamed, seen = [], [], []
    codes: dict[str, int] = {}
    for directory in dirs:
        out = scan(directory, T0 + 5)
        timeouts += [(directory.name, r["rank"], r["npu"])
                     for r in rows(out, "npu_hccl_rank_timeout_timestamp_seconds")]
        blamed += rows(out, "npu_hccl_peer_blamed_timestamp_seconds")
        seen += [(directory.name, r["rank"], r["npu"])
                 for r in rows(out, "npu_hccl_rank_last_seen_timestamp_seconds")]
        assert {r["comm"] for r in rows(out, "npu_hccl_rank_timeout_timestamp_seconds")} == {comm}
        for sample in out:
            labels = dict(sample.labels)
            if sample.metric == "npu_hccl_errors_total" and sample.value and labels["category"] == "exec_timeout":
                codes[labels["code"]] = codes.get(labels["code"], 0) + int(sample.value)
    assert sorted(timeouts) == [("node-1", "0", "0"), ("node-1", "1", "1"), ("node-2", "2", "0"),
                                ("node-2", "3", "1"), ("node-3", "4", "0"), ("node-4", "6", "0"),
                                ("node-4", "7", "1")]
    assert ("node-3", "5", "1") in seen  # the culprit's init line names its rank and NPU
    assert len(seen) == 8
    # one series per node and way of blaming (its victims all blame the same peer): the heartbeat
    # summary in the plogs and in the job log, the "remote rank" of the job log's EI0002 block
    assert sorted((b["how"], b["rank"], b["address"], b["comm"]) for b in blamed) == (
        [("lost", "5", "29.3.1.11", comm)] * 4 + [("waited_on", "5", "", comm)] * 4)
    assert codes == {"EI0002": 4, "task_exec_timeout": 7}  # once per file: a job log per node, a plog per rank

    culprit = DemoNode(dirs[2]).read()
    assert culprit.chip_fault(1, "link_down") is not None
    assert culprit.subnet == 3
    assert [DemoNode(d).read().chip_faults for d in (dirs[0], dirs[1], dirs[3])] == [{}, {}, {}]


def test_each_node_gets_its_own_subnet(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    dirs = make_fleet(tmp_path, count=2)
    assert fleet("--culprit", "node-1", "--npu", "0", *map(str, dirs)) == 0
    capsys.readouterr()
    assert [DemoNode(d).read().subnet for d in dirs] == [1, 2]


def test_a_culprit_is_a_directory_name_or_its_position(tmp_path: Path) -> None:
    dirs = [tmp_path / "a", tmp_path / "b", tmp_path / "node-1"]
    assert culprit_index(dirs, "b") == 1
    assert culprit_index(dirs, "node-1") == 2  # a directory of that name wins over the position
    assert culprit_index(dirs[:2], "node-2") == 1
    with pytest.raises(ValueError, match=r"node-1\.\.node-2"):
        culprit_index(dirs[:2], "node-3")


@pytest.mark.parametrize(("args", "message"), [
    (["--culprit", "node-1", "--npu", "0", "ONE"], "two demo directories or more"),
    (["--culprit", "node-3", "--npu", "0", "ONE", "TWO"], "neither a directory name"),
    (["--culprit", "node-2", "--npu", "7", "ONE", "TWO"], "--npu 7 is not a chip of node-2 (0..1)"),
    (["--culprit", "node-1", "--npu", "0", "ONE", "MISSING"], "no demo node at"),
])
def test_bad_requests_are_one_line_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                          args: list[str], message: str) -> None:
    make_fleet(tmp_path, count=2)
    names = {"ONE": str(tmp_path / "node-1"), "TWO": str(tmp_path / "node-2"), "MISSING": str(tmp_path / "nope")}
    assert fleet(*[names.get(arg, arg) for arg in args]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.startswith("npuwatch demo: ") and message in captured.err
    assert len(captured.err.splitlines()) == 1


def test_fleet_takes_no_demo_dir_and_the_node_actions_need_one(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    dirs = make_fleet(tmp_path, count=2)
    assert main(["demo", "--demo-dir", str(dirs[0]), "fleet", "hccl-hang", "--culprit", "node-1", "--npu", "0",
                 *map(str, dirs)]) == 2
    assert "not --demo-dir" in capsys.readouterr().err
    monkeypatch.setenv("NPUWATCH_DEMO_DIR", str(tmp_path / "none"))
    assert main(["demo", "show"]) == 2
    err = capsys.readouterr().err
    assert f"no demo node in {tmp_path / 'none'}" in err and "--demo-dir DIR" in err
    monkeypatch.setenv("NPUWATCH_DEMO_DIR", str(dirs[1]))  # the running demo, found without --demo-dir
    assert main(["demo", "set", "hot", "--npu", "1"]) == 0
    assert '"hot"' in capsys.readouterr().out
