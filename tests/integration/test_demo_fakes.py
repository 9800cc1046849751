"""The demo node's fake tools, run as real subprocesses through their generated wrappers.

Shapes are checked with regexes (the parsers are separate code); the clock is frozen through
NPUWATCH_DEMO_TIME so that "values move" and "counters rise" are deterministic.
"""

from __future__ import annotations

import itertools
import json
import os
import re
import subprocess
import time
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agent.demo import DemoNode, fake_hccn_tool, fake_npu_smi, start_demo
from agent.demo.state import DEMO_DIR_ENV, DEMO_TIME_ENV, STATE_FILE, DemoState, load_state
from collectors.hccn_link_stat import LINK_DOWN, LINK_UP, LinkStatRecord
from collectors.hccn_link_stat import parse as parse_link_stat

T0 = 1_750_000_000.0  # a fixed demo-clock instant
CLEAN_PATH = "/usr/bin:/bin"
ALL_TYPES = ("usages", "common", "power", "temp", "memory", "ecc", "health", "board", "hccs")


@pytest.fixture
def node(tmp_path: Path) -> DemoNode:
    return DemoNode(tmp_path / "demo").create()


def run(
    node: DemoNode,
    tool: str,
    *args: str,
    at: float | None = T0,
    stdin: str | None = None,
    timeout: float = 10,
) -> subprocess.CompletedProcess[str]:
    """Run a fake by its path with a clean environment (only PATH and, optionally, a frozen clock)."""
    env = {"PATH": CLEAN_PATH}
    if at is not None:
        env[DEMO_TIME_ENV] = repr(at)
    return subprocess.run(
        [str(node.tool_path(tool)), *args],
        env=env,
        input=stdin,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def ok(node: DemoNode, tool: str, *args: str, at: float | None = T0) -> str:
    result = run(node, tool, *args, at=at)
    assert result.returncode == 0, (args, result.stdout, result.stderr)
    return result.stdout


NPU_ROW = re.compile(r"^\| (\d+)\s+910B3\s+\| (\w+)\s+\| (\d+\.\d)\s+(\d+)\s+0\s+/ 0\s+\|$")
CHIP_ROW = re.compile(r"^\| 0\s+\| (0000:[0-9A-F]{2}:00\.0)\s+\| (\d+)\s+0\s+/ 0\s+(\d+)\s*/ 65536\s+\|$")


def table_rows(text: str) -> dict[int, dict[str, object]]:
    """npu id -> health, power, temp, bus, aicore, hbm_used from an ``npu-smi info`` table."""
    lines = text.splitlines()
    rows: dict[int, dict[str, object]] = {}
    for first, second in itertools.pairwise(lines):
        head, chip = NPU_ROW.match(first), CHIP_ROW.match(second)
        if head and chip:
            rows[int(head[1])] = {
                "health": head[2],
                "power": float(head[3]),
                "temp": int(head[4]),
                "bus": chip[1],
                "aicore": int(chip[2]),
                "hbm_used": int(chip[3]),
            }
    return rows


def kv(text: str) -> dict[str, str]:
    """First value of every ``key : value`` line (split at the first colon, both sides stripped)."""
    pairs: dict[str, str] = {}
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if sep and key.strip():
            pairs.setdefault(key.strip(), value.strip())
    return pairs


# ---------------------------------------------------------------- wrappers and state


def test_create_writes_state_and_four_executables(node: DemoNode) -> None:
    names = sorted(p.name for p in node.bin_dir.iterdir() if not p.name.startswith("."))
    assert names == ["ascend-dmi", "hccn_tool", "npu-smi", "probe-python"]
    for name in names:
        path = node.bin_dir / name
        assert os.access(path, os.X_OK)
        assert path.read_text().startswith("#!")
    state = node.read()
    assert (state.chips, state.model, state.delay_s) == (8, "910B3", 0.0)
    assert state.node_faults == {} and state.chip_faults == {}
    assert json.loads((node.directory / STATE_FILE).read_text())["chips"] == 8


def test_exists_tracks_state_and_executables(tmp_path: Path) -> None:
    node = DemoNode(tmp_path / "demo")
    assert not node.exists()
    node.create(chips=4)
    assert node.exists()
    node.tool_path("hccn_tool").unlink()
    assert not node.exists()
    node.write_executables()
    assert node.exists()


def test_env_puts_bin_dir_first_on_path_and_names_the_state_dir(node: DemoNode) -> None:
    env = node.env()
    assert env[DEMO_DIR_ENV] == str(node.directory)
    assert env["PATH"].split(os.pathsep)[0] == str(node.bin_dir)
    # found through PATH by bare name, as the agent's runner would
    result = subprocess.run(["npu-smi", "info", "-l"], env=env, capture_output=True, text=True, timeout=10)
    assert result.returncode == 0
    assert "Total Count                    : 8" in result.stdout


def test_fakes_refuse_without_a_state_dir(tmp_path: Path) -> None:
    node = DemoNode(tmp_path / "demo").create()
    (node.directory / STATE_FILE).unlink()
    result = run(node, "npu-smi", "info")
    assert result.returncode != 0
    assert "demo state" in result.stderr


def test_set_fault_validates_names_and_chips(node: DemoNode) -> None:
    with pytest.raises(ValueError, match="unknown fault"):
        node.set_fault("no_such_fault", chip=0)
    with pytest.raises(ValueError, match=r"applies to one chip: pass --npu N \(0\.\.7\)"):
        node.set_fault("link_down")
    with pytest.raises(ValueError, match=r"--npu 8 is not a chip of this node \(0\.\.7\)"):
        node.set_fault("link_down", chip=8)
    with pytest.raises(ValueError, match="node-wide"):
        node.set_fault("npu_smi_hang", chip=1)
    with pytest.raises(ValueError, match=r"'link_flap' takes no parameter 'period' \(it takes: period_s, since\)"):
        node.set_fault("link_flap", chip=1, period=4)
    with pytest.raises(ValueError, match="not a valid float"):
        node.set_fault("hbm_dbe", chip=1, interval_s="soon")
    with pytest.raises(ValueError, match="not one of Alarm, Warning, Critical"):
        node.set_fault("health", chip=1, state="Broken")
    assert node.read().chip_faults == {}
    node.set_fault("process", chip=2, name="python3", pid=4242)  # a parameter may be called "name"
    params = node.read().chip_fault(2, "process")
    assert params is not None
    assert (params["name"], params["pid"]) == ("python3", 4242)
    assert isinstance(params["since"], float)


def test_fault_switches_are_atomic_and_reversible(node: DemoNode) -> None:
    node.set_fault("link_down", chip=3, since=T0)
    node.set_fault("npu_smi_crash")
    state = load_state(node.directory)
    assert state.chip_fault(3, "link_down") == {"since": T0}
    assert state.node_fault("npu_smi_crash") is not None
    assert state.faults["chips"]["3"]["link_down"]["since"] == T0
    node.clear_fault("link_down", chip=3)
    assert node.read().chip_fault(3, "link_down") is None
    node.clear_all()
    assert node.read().faults == {"node": {}, "chips": {}}
    leftovers = [p.name for p in node.directory.iterdir() if p.name.startswith(".state-")]
    assert leftovers == []


def test_start_demo_creates_a_temp_node() -> None:
    demo = start_demo()
    try:
        assert demo.directory.name.startswith("npuwatch-demo-")
        assert demo.tool_path("npu-smi").exists()
        assert demo.read().chips == 8
    finally:
        for path in sorted(demo.directory.rglob("*"), reverse=True):
            path.rmdir() if path.is_dir() else path.unlink()
        demo.directory.rmdir()


# ---------------------------------------------------------------- npu-smi shapes


def test_info_table_has_the_910b_layout(node: DemoNode) -> None:
    text = ok(node, "npu-smi", "info")
    lines = text.splitlines()
    assert re.fullmatch(r"\| npu-smi 24\.1\.rc2\s+Version: 24\.1\.rc2\s+\|", lines[1])
    assert {len(line) for line in lines} == {98}
    rows = table_rows(text)
    assert sorted(rows) == list(range(8))
    assert len({r["bus"] for r in rows.values()}) == 8
    for row in rows.values():
        assert row["health"] == "OK"
        assert 70 <= float(row["power"]) <= 350  # type: ignore[arg-type]
        assert 35 <= int(row["temp"]) <= 75  # type: ignore[call-overload]
        assert 0 <= int(row["aicore"]) <= 100  # type: ignore[call-overload]
    assert re.search(
        r"^\| NPU\s+Chip\s+\| Process id\s+\| Process name\s+\| Process memory\(MB\)\s+\|$", text, re.M
    )
    assert len(re.findall(r"^\| No running processes found in NPU \d+\s+\|$", text, re.M)) == 8


def test_mapping_and_list(node: DemoNode) -> None:
    mapping = ok(node, "npu-smi", "info", "-m")
    assert re.fullmatch(r"\tNPU ID\s+Chip ID\s+Chip Logic ID\s+Chip Name", mapping.splitlines()[0])
    assert len(re.findall(r"^\t(\d+)\s+0\s+\1\s+Ascend 910B3$", mapping, re.M)) == 8
    assert len(re.findall(r"^\t\d+\s+1\s+-\s+Mcu$", mapping, re.M)) == 8
    listing = ok(node, "npu-smi", "info", "-l")
    assert re.search(r"^\tTotal Count\s+: 8$", listing, re.M)
    assert re.findall(r"^\tNPU ID\s+: (\d+)$", listing, re.M) == [str(i) for i in range(8)]


@pytest.mark.parametrize("info_type", ALL_TYPES)
def test_kv_types_print_tab_key_colon_value_lines(node: DemoNode, info_type: str) -> None:
    text = ok(node, "npu-smi", "info", "-t", info_type, "-i", "3", "-c", "0")
    width = 40 if info_type == "ecc" else 30
    line_re = re.compile(rf"^\t.{{{width}}} : \S.*$")
    lines = text.splitlines()
    assert lines, info_type
    for line in lines:
        assert line == "" or line_re.match(line), (info_type, line)


def test_kv_type_contents(node: DemoNode) -> None:
    usages = ok(node, "npu-smi", "info", "-t", "usages", "-i", "0")
    assert usages.splitlines()[-1] == "\tChip ID                        : 0"  # Chip ID last, as newer drivers
    assert kv(usages)["HBM Capacity(MB)"] == "65536"
    assert 0 <= int(kv(usages)["Aicore Usage Rate(%)"]) <= 100
    common = ok(node, "npu-smi", "info", "-t", "common", "-i", "0")
    assert re.search(r"^\tAicore Freq\(MHZ\)\s+: 1800$", common, re.M)
    assert common.rstrip().endswith("Chip Name                      : mcu")
    assert len(re.findall(r"Temperature\(C\)", common)) == 2  # chip and mcu blocks repeat the key
    assert (
        70
        <= float(kv(ok(node, "npu-smi", "info", "-t", "power", "-i", "0"))["NPU Real-time Power(W)"])
        <= 350
    )
    assert 35 <= int(kv(ok(node, "npu-smi", "info", "-t", "temp", "-i", "0"))["Temperature(C)"]) <= 75
    memory = kv(ok(node, "npu-smi", "info", "-t", "memory", "-i", "0"))
    assert memory["HBM Capacity(MB)"] == "65536" and memory["HBM Temperature(C)"].isdigit()
    board = kv(ok(node, "npu-smi", "info", "-t", "board", "-i", "0"))
    assert board["PCIe Bus Info"] == "0000:C1:00.0" and board["PCI Device ID"] == "0xD802"
    health = kv(ok(node, "npu-smi", "info", "-t", "health", "-i", "0"))
    assert (health["Health Status"], health["Error Code"]) == ("OK", "NA")
    hccs = ok(node, "npu-smi", "info", "-t", "hccs", "-i", "0", "-c", "0")
    assert kv(hccs)["hccs health status"] == "OK"
    tx = re.search(r"hccs tx packets\s+: \[([\d ]+)\]", hccs)
    assert tx and len(tx[1].split()) == 7


def test_hccs_bw_and_topo(node: DemoNode) -> None:
    bw = ok(node, "npu-smi", "info", "-t", "hccs-bw", "-i", "1", "-c", "0").splitlines()
    assert bw[0].split() == ["hccs", "link", "tx_bandwidth(GB/S)", "rx_bandwidth(GB/S)"]
    rows = [line.split() for line in bw[1:]]
    assert [r[0] for r in rows] == [*map(str, range(7)), "total"]
    assert all(re.fullmatch(r"\d+\.\d{6}", cell) for row in rows for cell in row[1:])
    topo = ok(node, "npu-smi", "info", "-t", "topo").splitlines()
    assert topo[0].split() == [f"NPU{i}" for i in range(8)] + ["CPU", "Affinity"]
    for i, line in enumerate(topo[1:9]):
        cells = line.split()
        assert cells[0] == f"NPU{i}" and cells[1 + i] == "X"
        assert cells[1:9].count("HCCS") == 7 and re.fullmatch(r"\d+-\d+", cells[9])
    assert "Legend:" in topo and "  HCCS = Connection traversing HCCS." in topo


def test_bad_arguments_fail_like_the_real_tool(node: DemoNode) -> None:
    result = run(node, "npu-smi", "info", "-t", "board", "-i", "42")
    assert result.returncode != 0
    assert result.stdout.splitlines() == [
        "Invalid card id.",
        "Error parameter of -i",
        "Usage: npu-smi info <watch|proc|-h|-m|-l|-t type> [Options...]",
    ]
    assert run(node, "npu-smi", "info", "-t", "nonsense", "-i", "0").returncode != 0
    assert run(node, "npu-smi", "info", "-t", "usages", "-i", "0", "-c", "7").returncode != 0


def test_sixteen_chip_node(tmp_path: Path) -> None:
    big = DemoNode(tmp_path / "big").create(chips=16)
    rows = table_rows(ok(big, "npu-smi", "info"))
    assert sorted(rows) == list(range(16))
    assert len({r["bus"] for r in rows.values()}) == 16
    assert run(big, "hccn_tool", "-i", "15", "-link", "-g").stdout == "link status: UP\n"


# ---------------------------------------------------------------- time and determinism


def test_same_instant_same_output_and_values_move_over_time(node: DemoNode) -> None:
    first = ok(node, "npu-smi", "info", at=T0)
    assert ok(node, "npu-smi", "info", at=T0) == first
    later = table_rows(ok(node, "npu-smi", "info", at=T0 + 45))
    now = table_rows(first)
    assert any(now[i]["power"] != later[i]["power"] for i in now)
    assert any(now[i]["aicore"] != later[i]["aicore"] for i in now)
    assert any(now[i]["hbm_used"] != later[i]["hbm_used"] for i in now)


def test_time_override_in_state_freezes_the_clock_without_env(node: DemoNode) -> None:
    node.freeze_time(T0)
    assert ok(node, "npu-smi", "info", at=None) == ok(node, "npu-smi", "info", at=T0)
    node.freeze_time(None)
    assert node.read().time_override is None


def test_counters_only_grow(node: DemoNode) -> None:
    def counters(at: float) -> dict[str, int]:
        pairs = kv(ok(node, "hccn_tool", "-i", "0", "-stat", "-g", at=at))
        return {k: int(v) for k, v in pairs.items() if k != "packet statistics"}

    before, after = counters(T0), counters(T0 + 30)
    assert before.keys() == after.keys()
    assert all(after[k] >= before[k] for k in before)
    assert after["roce_tx_all_pkt_num"] > before["roce_tx_all_pkt_num"]


# ---------------------------------------------------------------- chip faults


def test_health_alarm_with_error_codes(node: DemoNode) -> None:
    node.set_fault("health", chip=2, state="Alarm", codes=["8C084E00", "A4025021"])
    rows = table_rows(ok(node, "npu-smi", "info"))
    assert rows[2]["health"] == "Alarm"
    assert rows[1]["health"] == "OK"
    text = ok(node, "npu-smi", "info", "-t", "health", "-i", "2")
    assert kv(text)["Health Status"] == "Alarm"
    assert kv(text)["Error Code"] == "8C084E00 A4025021"
    assert re.search(r"^\t {30} : \S", text, re.M)  # continuation line with an empty key


def test_hbm_double_bit_errors_rise(node: DemoNode) -> None:
    node.set_fault("hbm_dbe", chip=1, since=T0, interval_s=10)
    node.set_fault("hbm_sbe_rate", chip=1, since=T0, per_s=2)

    def ecc(at: float) -> dict[str, str]:
        return kv(ok(node, "npu-smi", "info", "-t", "ecc", "-i", "1", at=at))

    early, late = ecc(T0 + 5), ecc(T0 + 65)
    assert int(early["HBM Double Bit Error Count"]) == 1
    assert int(late["HBM Double Bit Error Count"]) == 7
    assert int(late["HBM Double Bit Aggregate Total Err Cnt"]) >= 7
    assert int(late["HBM Single Bit Error Count"]) > int(early["HBM Single Bit Error Count"])
    assert kv(ok(node, "npu-smi", "info", "-t", "ecc", "-i", "0"))["HBM Double Bit Error Count"] == "0"


def test_vanished_chip_is_missing_everywhere(node: DemoNode) -> None:
    node.set_fault("vanish", chip=5)
    assert sorted(table_rows(ok(node, "npu-smi", "info"))) == [0, 1, 2, 3, 4, 6, 7]
    assert "No running processes found in NPU 5 " not in ok(node, "npu-smi", "info")
    assert not re.search(r"^\t5\s", ok(node, "npu-smi", "info", "-m"), re.M)
    assert re.search(r"Total Count\s+: 7", ok(node, "npu-smi", "info", "-l"))
    assert "NPU5" not in ok(node, "npu-smi", "info", "-t", "topo")
    gone = run(node, "npu-smi", "info", "-t", "board", "-i", "5")
    assert gone.returncode != 0 and gone.stdout.startswith("Invalid card id.")
    assert run(node, "hccn_tool", "-i", "5", "-link", "-g").returncode != 0
    assert run(node, "ascend-dmi", "-f", "-q", "-d", "5").returncode != 0


def test_process_is_listed_and_uses_hbm(node: DemoNode) -> None:
    idle = table_rows(ok(node, "npu-smi", "info"))[4]["hbm_used"]
    node.set_fault("process", chip=4, pid=31337, name="python3", memory_mb=20480)
    text = ok(node, "npu-smi", "info")
    assert re.search(r"^\| 4\s+0\s+\| 31337\s+\| python3\s+\| 20480\s+\|$", text, re.M)
    assert "No running processes found in NPU 4" not in text
    assert int(table_rows(text)[4]["hbm_used"]) >= int(idle) + 20480  # type: ignore[call-overload]


# ---------------------------------------------------------------- node-wide npu-smi faults


def test_hang_really_blocks(node: DemoNode) -> None:
    node.set_fault("npu_smi_hang")
    started = time.monotonic()
    with pytest.raises(subprocess.TimeoutExpired):
        run(node, "npu-smi", "info", timeout=1)
    assert time.monotonic() - started >= 1
    assert run(node, "hccn_tool", "-i", "0", "-link", "-g").returncode == 0  # other tools unaffected


def test_crash_exits_non_zero_with_stderr(node: DemoNode) -> None:
    node.set_fault("npu_smi_crash")
    result = run(node, "npu-smi", "info")
    assert result.returncode == 1
    assert result.stdout == ""
    assert "dcmi" in result.stderr


def test_garbage_is_not_a_table(node: DemoNode) -> None:
    normal = ok(node, "npu-smi", "info")
    node.set_fault("npu_smi_garbage")
    junk = ok(node, "npu-smi", "info")
    assert junk and junk != normal
    assert "npu-smi 24.1.rc2" not in junk
    assert not table_rows(junk)


def test_truncate_cuts_the_output_in_the_middle(node: DemoNode) -> None:
    normal = ok(node, "npu-smi", "info")
    node.set_fault("npu_smi_truncate")
    cut = ok(node, "npu-smi", "info")
    assert 0 < len(cut) < len(normal)
    assert normal.startswith(cut)
    assert "No running processes" not in cut


# ---------------------------------------------------------------- hccn_tool


def test_hccn_tool_healthy_shapes(node: DemoNode) -> None:
    assert ok(node, "hccn_tool", "-i", "0", "-link", "-g") == "link status: UP\n"
    assert ok(node, "hccn_tool", "-i", "0", "-net_health", "-g") == "net health status: Success\n"
    assert re.fullmatch(r"Speed: \d+ Mb/s\n", ok(node, "hccn_tool", "-i", "0", "-speed", "-g"))
    assert re.fullmatch(r"ipaddr:[\d.]+\nnetmask:[\d.]+\n", ok(node, "hccn_tool", "-i", "0", "-ip", "-g"))
    assert ok(node, "hccn_tool", "-i", "0", "-fec", "-g").startswith("fec mode: ")
    stat = ok(node, "hccn_tool", "-i", "0", "-stat", "-g").splitlines()
    assert stat[0] == "packet statistics:"
    assert all(re.fullmatch(r"[a-z0-9_]+:\d+", line) for line in stat[1:])
    names = {line.split(":")[0] for line in stat[1:]}
    assert {
        "roce_rx_err_pkt_num",
        "roce_tx_err_pkt_num",
        "roce_new_pkt_rty_num",
        "roce_unexpected_ack_num",
    } <= names
    link_stat = ok(node, "hccn_tool", "-i", "3", "-link_stat", "-g").splitlines()
    assert all(line.startswith("[devid 3]") for line in link_stat)
    assert re.fullmatch(r"\[devid 3\]current time\s+: \w{3} \w{3} [ \d]\d \d\d:\d\d:\d\d \d{4}", link_stat[0])
    assert re.fullmatch(r"\[devid 3\]link up count\s+: 1", link_stat[1])
    assert link_stat[2] == "[devid 3]link change records :"
    optical = kv(ok(node, "hccn_tool", "-i", "0", "-optical", "-g"))
    assert re.fullmatch(r"\d+ C", optical["temperature"])
    assert re.fullmatch(r"\d+\.\d+ mV", optical["Vcc"])
    for lane in range(4):
        assert 0.5 < float(optical[f"Rx Power{lane}"].removesuffix(" mW")) < 3.5
        assert re.fullmatch(r"\d+\.\d{4} mW", optical[f"Tx Power{lane}"])
    assert optical["Rx Los Flag"] == "0x0"


def test_hccn_tool_rejects_bad_ids_and_usage(node: DemoNode) -> None:
    assert run(node, "hccn_tool", "-i", "99", "-link", "-g").returncode != 0
    assert run(node, "hccn_tool", "-i", "0", "-bogus", "-g").returncode != 0


def test_link_down(node: DemoNode) -> None:
    node.set_fault("link_down", chip=2, since=T0 - 10)
    assert ok(node, "hccn_tool", "-i", "2", "-link", "-g") == "link status: DOWN\n"
    assert ok(node, "hccn_tool", "-i", "1", "-link", "-g") == "link status: UP\n"
    assert "Unknown!" in ok(node, "hccn_tool", "-i", "2", "-speed", "-g")
    assert ok(node, "hccn_tool", "-i", "2", "-net_health", "-g") == "net health status: Fault\n"
    records = [
        line for line in ok(node, "hccn_tool", "-i", "2", "-link_stat", "-g").splitlines() if "LINK" in line
    ]
    assert records[0].endswith("LINK DOWN")  # newest first


def test_link_flap_alternates_and_counts_up_transitions(node: DemoNode) -> None:
    node.set_fault("link_flap", chip=6, since=T0, period_s=4)

    def status(at: float) -> str:
        return ok(node, "hccn_tool", "-i", "6", "-link", "-g", at=at).split(": ")[1].strip()

    def up_count(at: float) -> int:
        text = ok(node, "hccn_tool", "-i", "6", "-link_stat", "-g", at=at)
        found = re.search(r"link up count\s+: (\d+)", text)
        assert found
        return int(found[1])

    assert [status(T0 + dt) for dt in (1, 3, 5, 7)] == ["DOWN", "UP", "DOWN", "UP"]
    assert up_count(T0 + 9) > up_count(T0 + 1)
    stat_early = kv(ok(node, "hccn_tool", "-i", "6", "-stat", "-g", at=T0 + 1))
    stat_late = kv(ok(node, "hccn_tool", "-i", "6", "-stat", "-g", at=T0 + 61))
    assert int(stat_late["roce_new_pkt_rty_num"]) > int(stat_early["roce_new_pkt_rty_num"])


def test_optics_without_light(node: DemoNode) -> None:
    node.set_fault("optics_no_light", chip=0, since=T0)
    optical = kv(ok(node, "hccn_tool", "-i", "0", "-optical", "-g", at=T0 + 10))
    for lane in range(4):
        assert float(optical[f"Rx Power{lane}"].removesuffix(" mW")) < 0.01
    assert int(optical["Rx Los Flag"], 16) != 0
    assert int(optical["Rx LoL Flag"], 16) != 0
    assert ok(node, "hccn_tool", "-i", "0", "-link", "-g", at=T0 + 10) == "link status: DOWN\n"
    early = kv(ok(node, "hccn_tool", "-i", "0", "-stat", "-g", at=T0 + 10))
    late = kv(ok(node, "hccn_tool", "-i", "0", "-stat", "-g", at=T0 + 20))
    assert int(late["roce_rx_err_pkt_num"]) > int(early["roce_rx_err_pkt_num"]) > 0


@pytest.mark.parametrize("status", ["Fault", "Socket failed"])
def test_net_health_failure(node: DemoNode, status: str) -> None:
    node.set_fault("net_health_fail", chip=7, status=status)
    assert ok(node, "hccn_tool", "-i", "7", "-net_health", "-g") == f"net health status: {status}\n"
    assert ok(node, "hccn_tool", "-i", "7", "-link", "-g") == "link status: UP\n"


def test_hccn_tool_node_faults(node: DemoNode) -> None:
    node.set_fault("hccn_tool_crash")
    assert run(node, "hccn_tool", "-i", "0", "-link", "-g").returncode == 1
    assert run(node, "npu-smi", "info", "-l").returncode == 0


# ---------------------------------------------------------------- ascend-dmi


def test_ascend_dmi_compute_test(node: DemoNode) -> None:
    text = ok(node, "ascend-dmi", "-f", "-t", "fp16", "-q")
    header = next(line for line in text.splitlines() if "Device" in line)
    assert header.split() == ["Device", "Execute", "Times", "Duration(ms)", "TFLOPS@FP16", "Power(W)"]
    rows = re.findall(r"^\s+(\d+)\s+([\d,]+)\s+(\d+)\s+(\d+\.\d+)\s+(\d+\.\d+)$", text, re.M)
    assert [int(r[0]) for r in rows] == list(range(8))
    for _, times, _, tflops, _ in rows:
        assert "," in times
        assert float(tflops) == pytest.approx(313.7, rel=0.01)


def test_ascend_dmi_prompts_without_q(node: DemoNode) -> None:
    declined = run(node, "ascend-dmi", "-f", "-d", "0", stdin="N\n")
    assert declined.returncode != 0 and "(Y/N)" in declined.stdout
    accepted = run(node, "ascend-dmi", "-f", "-d", "0", stdin="Y\n")
    assert accepted.returncode == 0 and "(Y/N)Y" in accepted.stdout and "TFLOPS@FP16" in accepted.stdout


def test_ascend_dmi_bandwidth(node: DemoNode) -> None:
    text = ok(node, "ascend-dmi", "--bw", "-q", "-d", "0")
    found = dict(re.findall(r"^\s+0\s+(h2d|d2h|d2d|p2p)\s+\d+\s+(\d+\.\d+)$", text, re.M))
    assert sorted(found) == ["d2d", "d2h", "h2d", "p2p"]
    assert float(found["d2d"]) > float(found["h2d"]) > 1


# ---------------------------------------------------------------- cost


def test_per_call_delay(node: DemoNode) -> None:
    node.set_delay(0.3)
    started = time.monotonic()
    ok(node, "hccn_tool", "-i", "0", "-link", "-g")
    assert time.monotonic() - started >= 0.3


def test_the_calls_of_a_scrape_answer_every_time(node: DemoNode) -> None:
    """The calls an agent makes most, repeated, each answer (their cost: bench/hot_paths.py)."""
    calls = [
        ("npu-smi", "info"),
        ("npu-smi", "info", "-t", "usages", "-i", "0"),
        ("hccn_tool", "-i", "0", "-stat", "-g"),
    ]
    for _ in range(4):
        for tool, *args in calls:
            assert ok(node, tool, *args)


# ---------------------------------------------------------------- counters keep their history


def ecc_totals(node: DemoNode, npu: int, at: float) -> dict[str, int]:
    pairs = kv(ok(node, "npu-smi", "info", "-t", "ecc", "-i", str(npu), at=at))
    return {key.removeprefix("HBM "): int(value) for key, value in pairs.items() if key.startswith("HBM ")}


def test_clearing_ecc_faults_keeps_the_aggregate_totals(node: DemoNode) -> None:
    node.set_fault("hbm_dbe", chip=1, since=T0, interval_s=10)
    node.set_fault("hbm_sbe_rate", chip=1, since=T0, per_s=2)
    before = ecc_totals(node, 1, T0 + 15)
    assert before["Double Bit Aggregate Total Err Cnt"] == 2
    assert before["Single Bit Aggregate Total Err Cnt"] == 30
    node.clear_all(at=T0 + 20)
    after = ecc_totals(node, 1, T0 + 30)
    # a cleared fault stops new errors; the aggregate totals, like real counters, stay where they were
    assert after["Double Bit Aggregate Total Err Cnt"] == 3
    assert after["Single Bit Aggregate Total Err Cnt"] == 40
    assert after["Double Bit Isolated Pages Count"] == 3  # retired pages stay retired
    assert (after["Double Bit Error Count"], after["Single Bit Error Count"]) == (0, 0)  # the chip was "repaired"
    node.set_fault("hbm_dbe", chip=1, since=T0 + 40, interval_s=10)  # a new episode adds to the old one
    assert ecc_totals(node, 1, T0 + 45)["Double Bit Aggregate Total Err Cnt"] == 4
    assert ecc_totals(node, 1, T0 + 45)["Double Bit Error Count"] == 1


def link_stat(node: DemoNode, npu: int, at: float) -> LinkStatRecord:
    return parse_link_stat(ok(node, "hccn_tool", "-i", str(npu), "-link_stat", "-g", at=at))


def test_link_down_then_clear_records_one_down_and_one_up(node: DemoNode) -> None:
    quiet = link_stat(node, 2, T0)
    node.set_fault("link_down", chip=2, since=T0 + 10)
    down = link_stat(node, 2, T0 + 50)
    node.clear_fault("link_down", chip=2, at=T0 + 100)
    up = link_stat(node, 2, T0 + 110)
    assert ok(node, "hccn_tool", "-i", "2", "-link", "-g", at=T0 + 110) == "link status: UP\n"
    assert [change.state for change in up.changes[:2]] == [LINK_UP, LINK_DOWN]  # newest first
    assert [change.at.timestamp() for change in up.changes[:2]] == [T0 + 100, T0 + 10]
    assert (quiet.link_up_count, down.link_up_count, up.link_up_count) == (1, 1, 2)
    newest = [record.newest_change for record in (quiet, down, up)]
    assert all(change is not None for change in newest)
    stamps = [change.at.timestamp() for change in newest if change is not None]
    assert stamps == sorted(stamps) and stamps[-1] == T0 + 100  # never back to the boot record


def test_clearing_a_flap_keeps_its_link_ups_and_brings_the_link_up(node: DemoNode) -> None:
    node.set_fault("link_flap", chip=6, since=T0, period_s=4)
    during = link_stat(node, 6, T0 + 9)  # DOWN at 0, 4, 8; UP at 2, 6
    assert during.link_up_count == 3
    node.clear_fault("link_flap", chip=6, at=T0 + 9)  # ends while DOWN: the port comes back UP
    after = link_stat(node, 6, T0 + 20)
    assert after.link_up_count == 4
    assert after.changes[0].state == LINK_UP and after.changes[0].at.timestamp() == T0 + 9
    assert ok(node, "hccn_tool", "-i", "6", "-link", "-g", at=T0 + 20) == "link status: UP\n"


def test_a_second_link_fault_keeps_the_port_down_until_both_end(node: DemoNode) -> None:
    node.set_fault("link_down", chip=0, since=T0)
    node.set_fault("optics_no_light", chip=0, since=T0 + 5)
    node.clear_fault("link_down", chip=0, at=T0 + 10)
    assert ok(node, "hccn_tool", "-i", "0", "-link", "-g", at=T0 + 11) == "link status: DOWN\n"
    assert link_stat(node, 0, T0 + 11).link_up_count == 1
    node.clear_fault("optics_no_light", chip=0, at=T0 + 20)
    assert link_stat(node, 0, T0 + 21).link_up_count == 2


def test_the_history_survives_a_restart_of_the_agent(node: DemoNode) -> None:
    node.set_fault("hccs_error", chip=3, since=T0, per_s=1)
    node.clear_all(at=T0 + 30)
    DemoNode(node.directory).open()  # what `npuwatch run --demo --demo-dir DIR` does on start
    hccs = ok(node, "npu-smi", "info", "-t", "hccs", "-i", "3", at=T0 + 60)
    errors = re.search(r"hccs error count\s+: \[(\d+)", hccs)
    assert errors and int(errors[1]) == 31
    assert kv(hccs)["hccs health status"] == "OK"


COUNTER_FAULTS = ("hbm_dbe", "hbm_sbe_rate", "hbm_sbe_rising", "hccs_error", "link_down", "link_flap",
                  "optics_no_light", "optics_degrading")
# Parameters that make a fault count (or go dark) within the steps' seconds
FAST_PARAMS: dict[str, dict[str, float]] = {"link_flap": {"period_s": 4.0}, "optics_degrading": {"duration_s": 30.0},
                                            "hbm_sbe_rising": {"per_h": 36000.0, "ramp_s": 20.0}}


def counters_of(state: DemoState, now: float) -> dict[str, float]:
    """Every counter the fakes print for chip 0, read through the fakes' render functions."""
    out: dict[str, float] = {}
    ecc = fake_npu_smi.render(state, now, ["info", "-t", "ecc", "-i", "0"]).stdout
    out.update({key: int(value) for key, value in kv(ecc).items() if "Aggregate" in key})
    hccs = fake_npu_smi.render(state, now, ["info", "-t", "hccs", "-i", "0"]).stdout
    for key in ("tx packets", "rx packets", "retry count", "error count"):
        found = re.search(rf"hccs {key}\s+: \[([\d ]+)\]", hccs)
        assert found
        out.update({f"hccs {key} {link}": int(v) for link, v in enumerate(found[1].split())})
    stat = fake_hccn_tool.render(state, now, ["-i", "0", "-stat", "-g"]).stdout
    out.update({key: int(value) for key, value in kv(stat).items() if key != "packet statistics"})
    record = parse_link_stat(fake_hccn_tool.render(state, now, ["-i", "0", "-link_stat", "-g"]).stdout)
    out["link up count"] = record.link_up_count
    newest = record.newest_change
    assert newest is not None
    out["last link change"] = newest.at.timestamp()
    return out


@settings(max_examples=40, deadline=None, derandomize=True)
@given(st.lists(st.tuples(st.sampled_from(("set", "clear", "clear_all")), st.sampled_from(COUNTER_FAULTS),
                          st.integers(2, 40)), min_size=1, max_size=12))
def test_every_printed_counter_is_monotonic_across_set_and_clear(
        tmp_path_factory: pytest.TempPathFactory, steps: list[tuple[str, str, int]]) -> None:
    node = DemoNode(tmp_path_factory.mktemp("demo")).create(chips=1)
    now = T0
    previous = counters_of(node.read(), now)
    for action, fault, gap in steps:
        now += gap
        node.freeze_time(now)  # the demo clock that set_fault / clear_fault stamp with
        if action == "set":
            node.set_fault(fault, chip=0, **FAST_PARAMS.get(fault, {}))
        elif action == "clear":
            node.clear_fault(fault, chip=0)
        else:
            node.clear_all()
        for at in (now, now + 1.5):  # the next step comes 2 s or more later: the clock never runs back
            current = counters_of(node.read(), at)
            went_down = {key: (previous[key], value) for key, value in current.items() if value < previous[key]}
            assert not went_down, (action, fault, went_down)
            previous = current


def test_hot_chip_reads_above_the_critical_threshold_everywhere(node: DemoNode) -> None:
    threshold = 95  # alerts/npu.rules.yml: NPUTemperatureHigh critical above 95 C
    node.set_fault("hot", chip=3)
    for at in (T0, T0 + 7, T0 + 23):
        rows = table_rows(ok(node, "npu-smi", "info", at=at))
        assert int(rows[3]["temp"]) > threshold  # type: ignore[call-overload]
        assert int(rows[2]["temp"]) <= 75  # type: ignore[call-overload]
        assert int(kv(ok(node, "npu-smi", "info", "-t", "temp", "-i", "3", at=at))["Temperature(C)"]) > threshold
        common = ok(node, "npu-smi", "info", "-t", "common", "-i", "3", at=at)
        chip_block = common.split("\n\n")[1]  # the chip block, before the mcu block
        assert int(kv(chip_block)["Temperature(C)"]) > threshold
        assert int(kv(ok(node, "npu-smi", "info", "-t", "memory", "-i", "3", at=at))["HBM Temperature(C)"]) > threshold
    node.set_fault("hot", chip=3, celsius=88)  # the warning band only
    assert 85 < int(table_rows(ok(node, "npu-smi", "info"))[3]["temp"]) <= 89  # type: ignore[call-overload]
    node.clear_fault("hot", chip=3)
    assert int(table_rows(ok(node, "npu-smi", "info"))[3]["temp"]) <= 75  # type: ignore[call-overload]
