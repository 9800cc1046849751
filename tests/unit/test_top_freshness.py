"""``npuwatch top`` marks every reading whose collector's last success is older than its interval (or whose
collector is down), and its header's age is the oldest reading's, not the fetch's; its process list has USER,
CPU %, run time and the command line from the agent's per-process series."""

from __future__ import annotations

import re

from agent.top.freshness import Freshness
from agent.top.history import History
from agent.top.model import Fetched, parse_view, samples_of
from agent.top.panels import run_time
from agent.top.render import TopState, frame, plain
from tests.support import top_golden

TEXT = top_golden.EXPOSITION.read_text(encoding="utf-8")
NOW = top_golden.NOW


def _frame(text: str, now: float, width: int = 200, history: History | None = None) -> str:
    got = Fetched(parse_view(samples_of(text)), NOW - 1.0, None, "http://n/metrics")
    assert got.view is not None
    if history is None:
        history = History()
        history.add(got.view)
    return plain(frame(got, history, TopState(), width=width, height=60, node="n", now=now))


def _rows(text: str) -> dict[str, str]:
    return {line.split()[0]: line for line in text.splitlines() if re.match(r"^ {3}\d ", line)}


def _last_success(collector: str) -> float:
    found = next(c for c in parse_view(samples_of(TEXT)).collectors if c.name == collector)
    assert found.last_success is not None
    return found.last_success


def test_fresh_readings_carry_no_mark_and_the_header_says_the_oldest_readings_age() -> None:
    text = _frame(TEXT, NOW)
    assert "?" not in "".join(_rows(text).values()) and "stale" not in text
    view = parse_view(samples_of(TEXT))
    oldest = Freshness(view, NOW).oldest()
    assert oldest is not None
    # not the fetch's 1 s: the oldest reading behind the table (the least recent of its collectors' runs)
    assert oldest[0] > 4.0 and "data 4.2 s old" in text.splitlines()[0]


def test_after_an_npu_smi_hang_every_reading_is_marked_stale_and_the_header_says_how_old() -> None:
    later = _last_success("npu_smi_info") + 185  # npu-smi hung: no round for three minutes
    text = _frame(TEXT, later)
    first = text.splitlines()[0]
    assert re.search(r"data 3 min \d+ s old, \? stale", first), first
    said = " ".join(text.split())
    assert "? marks a stale reading: " in said and "npu_smi_info last read 3 min 5 s ago (every 10 s)" in said
    for name, row in _rows(text).items():
        assert re.search(r"\d°C\?", row), (name, row)  # the temperature, one of npu_smi_info's readings
        assert re.search(r"\d%\?", row), (name, row)  # AI Core
    assert "80E18402 SeparateNPU: isolate the chip now?" in _rows(text)["2"]  # npu_smi_health's code


def test_a_collector_that_is_down_marks_its_readings_at_once() -> None:
    down = TEXT.replace('npuwatch_collector_up{collector="npu_smi_health"} 1.0',
                        'npuwatch_collector_up{collector="npu_smi_health"} 0.0')
    assert down != TEXT
    text = _frame(down, NOW)
    row = _rows(text)["2"]
    assert row.endswith("isolate the chip now?")  # the code is npu_smi_health's last good reading
    assert "°C?" not in row and "%?" not in row  # npu_smi_info's readings are current
    assert "npu_smi_health last read" in text and ", now down" in text


def test_an_agent_that_exports_no_interval_gets_no_marks() -> None:
    old = "\n".join(line for line in TEXT.splitlines() if not line.startswith("npuwatch_collector_interval_seconds"))
    assert "?" not in "".join(_rows(_frame(old, NOW + 600)).values())


def _with_processes(cpu: float) -> str:
    lines = [
        "# TYPE npu_process_cpu_seconds_total counter",
        f'npu_process_cpu_seconds_total{{npu="7",chip="0",pid="41207"}} {cpu}',
        "# TYPE npu_process_start_time_seconds gauge",
        f'npu_process_start_time_seconds{{npu="7",chip="0",pid="41207"}} {NOW - 3725}',
        "# TYPE npu_process_info gauge",
        'npu_process_info{npu="7",chip="0",pid="41207",command="python3 train.py --config llama.yaml"} 1',
    ]
    return TEXT.replace('pid="41207",process="python3",user=""', 'pid="41207",process="python3",user="alice"') \
        + "\n".join(lines) + "\n"


def test_the_process_list_has_user_cpu_run_time_and_command_line() -> None:
    collected = _last_success("npu_smi_info")
    text = _frame(_with_processes(cpu=(collected - (NOW - 3725)) * 1.5), NOW, width=120)
    line = next(line for line in text.splitlines() if " 41207 " in line)
    # one round seen (--once): the CPU use since the process started, 150 % of a core
    assert line.split()[:6] == ["7", "41207", "alice", "11.0G", "150", "1:02:05"]
    assert line.endswith("python3 train.py --config llama.yaml")


def test_cpu_is_the_use_between_the_agents_last_two_rounds() -> None:
    first = _with_processes(cpu=100.0)
    history = History()
    view = parse_view(samples_of(first))
    history.add(view)
    collected = _last_success("npu_smi_info")
    second = re.sub(r'(npuwatch_collector_last_success_timestamp_seconds\{collector="npu_smi_info"\}) \S+',
                    rf"\1 {collected + 10}", _with_processes(cpu=105.0))
    assert second != _with_processes(cpu=105.0)
    history.add(parse_view(samples_of(second)))
    line = next(line for line in _frame(second, NOW, 120, history).splitlines() if " 41207 " in line)
    assert line.split()[4] == "50"  # 5 CPU seconds in 10 s
    history.add(parse_view(samples_of(TEXT.replace('pid="41207"', 'pid="1"'))))
    assert "41207" not in history.cpu  # a process gone is forgotten (its pid may come back as another)


def test_run_time_reads_as_ps_prints_it() -> None:
    assert [run_time(s) for s in (5, 65, 3725, 90061)] == ["00:05", "01:05", "1:02:05", "1d 01h"]


def test_the_detail_marks_each_stale_reading() -> None:
    up = 'npuwatch_collector_up{collector="hccn_link"} '
    down = TEXT.replace(up + '1.0', up + '0.0')
    assert down != TEXT
    got = Fetched(parse_view(samples_of(down)), NOW - 1.0, None, "http://n/metrics")
    text = plain(frame(got, History(), TopState(detail=True, selected=6), width=200, height=60, node="n", now=NOW))
    said = " ".join(text.split())
    assert "RoCE link DOWN" in said and "net health" in said
    link = next(line for line in text.splitlines() if line.startswith("  RoCE link"))
    assert link.endswith("? stale")
    assert not next(line for line in text.splitlines() if "processes" in line).endswith("stale")


def test_a_reading_the_agent_no_longer_serves_is_left_out_not_marked() -> None:
    gone = "\n".join(line for line in TEXT.splitlines() if not line.startswith("npu_temperature_celsius{"))
    text = _frame(gone, _last_success("npu_smi_info") + 60)
    for row in _rows(text).values():
        assert "°C" not in row and " -? " not in row and not row.endswith("-?")


def test_the_hccl_panel_says_when_the_log_scanner_is_stale() -> None:
    assert "the log scanner" not in _frame(TEXT, NOW)
    up = 'npuwatch_collector_up{collector="hccl_logs"} '
    down = TEXT.replace(up + "1.0", up + "0.0")
    assert down != TEXT
    said = " ".join(_frame(down, NOW).split())
    assert "HCCL local rank 1 timed out" in said and "? stale: the log scanner is down or late" in said


def test_a_round_is_late_after_its_interval_half_again_its_duration_and_2_s() -> None:
    text = ('npuwatch_collector_up{collector="npu_smi_info"} 1\n'
            'npuwatch_collector_last_success_timestamp_seconds{collector="npu_smi_info"} 1000\n'
            'npuwatch_collector_interval_seconds{collector="npu_smi_info"} 10\n'
            'npuwatch_collector_duration_seconds{collector="npu_smi_info"} 1\n')
    view = parse_view(samples_of(text))
    due = 1000 + 10 * 1.5 + 1 + 2
    assert not Freshness(view, due - 0.1).is_stale("npu_temperature_celsius")  # a round delayed by its group
    assert Freshness(view, due + 0.1).is_stale("npu_temperature_celsius")
    assert not Freshness(view, due + 0.1).is_stale("npu_roce_link_up")  # another collector's reading
