"""``npuwatch top``'s frames: the golden frames of a demo node at 40x10, 80x24, 120x40 and 200x60, every terminal
size without a traceback or an overlong line, what is left out when the agent does not export it, and the keys."""

from __future__ import annotations

import curses

import pytest

from agent.top.columns import columns
from agent.top.history import History, sparkline
from agent.top.model import Fetched, parse_view, samples_of
from agent.top.render import TopState, frame, plain, sorted_rows
from agent.top.screen import apply_key
from tests.support import top_golden

TEXT = top_golden.EXPOSITION.read_text(encoding="utf-8")
FETCHED = top_golden.fetched(TEXT)


@pytest.mark.parametrize(("width", "height"), top_golden.SIZES)
def test_golden_frames(width: int, height: int) -> None:
    assert top_golden.render(width, height) == (top_golden.GOLDEN / f"frame_{width}x{height}.txt").read_text()


def test_every_npu_is_a_row_with_what_the_demo_faults_set() -> None:
    rows = {line.split()[0]: line for line in top_golden.render(200, 60).splitlines()[4:12]}
    assert sorted(rows) == [str(npu) for npu in range(8)]
    assert " 97°C " in rows["4"]
    assert " DOWN " in rows["6"]
    assert "80E18402 SeparateNPU: isolate the chip now" in rows["2"]
    # the Health column is the agent's lead cause on the chip (npu_chip_status)
    assert " isolate " in rows["2"]
    assert " too hot " in rows["4"]
    assert " link dn " in rows["6"]
    assert " ok " in rows["0"]


@pytest.mark.parametrize(("status", "cause", "word"), [
    ("fail", "hbm_dbe", "HBM DBE"),
    ("fail", "hccs_unhealthy", "HCCS NOK"),
    ("fail", "chip_too_hot", "too hot"),
    ("warn", "chip_hot", "hot"),
    ("fail", "chip_fault_isolate", "isolate"),
    ("unknown", "hbm_ecc", "hbm_ecc"),
])
def test_the_health_cell_and_sort_are_the_agents_status(status: str, cause: str, word: str) -> None:
    text = (f'npu_chip_status{{npu="3",chip="0",status="{status}",cause="{cause}"}} 1\n'
            'npu_chip_status{npu="4",chip="0",status="ok",cause=""} 1\n')
    rows = sorted_rows(parse_view(samples_of(text)), TopState(sort="health"))
    lines = plain(frame(top_golden.fetched(text), History(), TopState(), width=200, height=20, node="n",
                        now=top_golden.NOW)).splitlines()
    three = next(line for line in lines if line.split()[:1] == ["3"])
    four = next(line for line in lines if line.split()[:1] == ["4"])
    assert f" {word} " in three and " ok " in four, (three, four)
    assert [row.npu for row in rows] == [3, 4]  # worse first


@pytest.mark.parametrize("reading", [
    'npu_temperature_celsius{npu="3",chip="0"} 97', 'npu_hbm_ecc_current_errors{npu="3",chip="0",bit="double"} 2',
    'npu_fault_handling{npu="3",chip="0",handling="ManuallySeparateNPU"} 1', 'npu_roce_link_up{npu="3",chip="0"} 0',
])
def test_top_judges_no_reading_itself(reading: str) -> None:
    """Without the agent's verdict series a reading is shown as read, never turned into a status."""
    text = reading + "\n"
    lines = plain(frame(top_golden.fetched(text), History(), TopState(), width=200, height=20, node="n",
                        now=top_golden.NOW)).splitlines()
    three = next(line for line in lines if line.split()[:1] == ["3"])
    assert " - " in three and not any(word in three for word in ("too hot", "HBM DBE", "isolate", "link dn")), three
    assert any("exports no verdict" in line for line in lines)


def test_the_panels_show_the_hccl_incident() -> None:
    text = top_golden.render(200, 60)
    assert "HCCL      local rank 1 timed out" in text
    assert "communicator 29.1.0.10%enp_60000_0_" in text and "(8 ranks)" in text


@pytest.mark.parametrize("width", [1, 5, 9, 10, 20, 40, 79, 80, 81, 120, 300])
@pytest.mark.parametrize("height", [1, 2, 3, 5, 12, 24, 60])
def test_any_terminal_size_gets_a_frame_that_fits(width: int, height: int) -> None:
    for state in (TopState(), TopState(detail=True, selected=6), TopState(help=True), TopState(sort="temp")):
        lines = frame(FETCHED, History(), state, width=width, height=height, node="n",
                      now=top_golden.NOW)
        assert len(lines) <= height
        assert all(sum(len(text) for text, _ in line) <= width for line in lines)


def _last_success(text: str, collector: str) -> float:
    view = parse_view(samples_of(text))
    found = next(c for c in view.collectors if c.name == collector)
    assert found.last_success is not None
    return found.last_success


def test_at_80x24_every_npu_keeps_its_codes_and_the_data_age() -> None:
    text = top_golden.render(80, 24)
    assert "data 4.2 s old" in text.splitlines()[0]
    assert "80E18402 SeparateNPU" in text
    assert all(f"\n{npu:>4} " in text for npu in range(8))


def test_a_reading_the_agent_does_not_export_is_left_out() -> None:
    bare = ("# TYPE npuwatch_collector_up gauge\nnpuwatch_collector_up{collector=\"npu_smi_info\"} 1\n"
            "# TYPE npu_temperature_celsius gauge\nnpu_temperature_celsius{npu=\"3\",chip=\"0\"} 61\n")
    text = plain(frame(top_golden.fetched(bare), History(), TopState(), width=200, height=20, node="n",
                       now=top_golden.NOW))
    (row,) = [line for line in text.splitlines() if line.startswith("   3 ")]
    assert " 61°C " in row
    assert "%" not in row and "W " not in row and "/" not in row  # no utilization, power or HBM guessed
    assert "driver" not in text and "Probes" not in text and "Checks" not in text


def test_an_agent_that_stops_answering_shows_the_age_of_the_last_view() -> None:
    stale = Fetched(parse_view(samples_of(TEXT)), top_golden.NOW, "Connection refused", "http://x/metrics")
    text = plain(frame(stale, History(), TopState(), width=120, height=30, node="n", now=top_golden.NOW + 95))
    assert "data 1 min 39 s old, ? stale" in text
    assert "the agent stopped answering: Connection refused" in text
    never = plain(frame(Fetched(None, None, "Connection refused", "http://x/metrics"), History(), TopState(),
                        width=120, height=30, node="n", now=top_golden.NOW))
    assert "no data from http://x/metrics: Connection refused" in never


def test_a_flapping_link_reads_flapping_from_the_first_frame() -> None:
    """The flap count is the agent's, over the tool's own history: a fresh ``top --once`` shows it, and a port
    that flaps and is down now reads as flapping in both cells and the header."""
    text = ('npu_roce_link_up{npu="3",chip="0"} 0\n'
            'npu_chip_status{npu="3",chip="0",status="fail",cause="link_flap"} 1\n'
            'npu_fault_since_timestamp_seconds{npu="3",chip="0",kind="link_flap",status="fail"} 1796601700\n'
            'npu_node_status{status="fail",cause="link_flap",npu="3"} 1\n')
    lines = plain(frame(top_golden.fetched(text), History(), TopState(), width=200, height=30, node="n",
                        now=top_golden.NOW)).splitlines()
    (row,) = [line for line in lines if line.startswith("   3 ")]
    assert row.split().count("flapping") == 2 and "DOWN" not in row and "link dn" not in row, row
    assert any(line.startswith("FAIL: RoCE link flapping on NPU 3") for line in lines), lines


def test_the_detail_of_a_selected_npu() -> None:
    state = TopState(detail=True, selected=6)
    text = top_golden.render(120, 40, state)
    assert text.splitlines()[3].startswith("NPU 6")
    assert "RoCE link DOWN" in text and "optics rx" in text and "HBM ECC now" in text


def test_sorting_by_temperature_puts_the_hot_chip_first() -> None:
    view = parse_view(samples_of(TEXT))
    assert sorted_rows(view, TopState(sort="temp"))[0].npu == 4
    assert sorted_rows(view, TopState(sort="health"))[0].npu == 2  # the one with a code
    assert sorted_rows(view, TopState(sort="npu", reverse=True))[0].npu == 7


def test_keys() -> None:
    state = TopState()
    assert not apply_key(state, ord("s"), 8) and state.sort == "aicore"
    assert not apply_key(state, ord("S"), 8) and state.sort == "npu"
    assert not apply_key(state, ord("r"), 8) and state.reverse
    for _ in range(20):
        apply_key(state, curses.KEY_DOWN, 8)
    assert state.selected == 7
    apply_key(state, ord("k"), 8)
    assert state.selected == 6
    apply_key(state, 10, 8)
    assert state.detail
    apply_key(state, 27, 8)
    assert not state.detail
    apply_key(state, ord("?"), 8)
    assert state.help
    assert not apply_key(state, ord("x"), 8) and not state.help  # any key closes the help
    assert apply_key(state, ord("q"), 8)


def test_sparklines_scale_and_right_align() -> None:
    assert sparkline([0.0, 0.5, 1.0], 5, 0.0, 1.0) == "  ▁▅█"
    assert sparkline([0.0, 0.5, 1.0], 5, 0.0, 1.0, ascii_only=True) == "  _=#"
    assert sparkline([2.0], 2, 0.0, 1.0) == " █"  # clipped, not overflowing


# ----------------------------------------------------------------------------- layout: words, priorities, rows

_BAR_MARKS = set("█░#.▁▂▃▄▅▆▇_-~=+*")


def _words(text: str) -> set[str]:
    return {word for word in text.split() if not set(word) <= _BAR_MARKS}


def _states() -> list[TopState]:
    return [TopState(), TopState(detail=True, selected=6), TopState(help=True), TopState(sort="hbm", reverse=True)]


def _render(width: int, height: int, state: TopState) -> str:
    history = History()
    assert FETCHED.view is not None
    history.add(FETCHED.view)
    return plain(frame(FETCHED, history, state, width=width, height=height, node="demo-node", now=top_golden.NOW))


def test_no_width_cuts_a_word() -> None:
    whole: set[str] = set()
    for width in (80, 100, 120, 160, 200, 400):
        for state in _states():
            whole |= _words(_render(width, 100, state)) | _words(_render(width, 17, state))
            whole |= _words(_render(width, 10, state)) | _words(_render(width, 10, TopState(selected=7)))
    for width in range(24, 130, 3):
        for height in (12, 24, 40):
            for state in _states():
                cut = _words(_render(width, height, state)) - whole
                assert not cut, f"{width}x{height} {state}: {sorted(cut)}"


def test_at_80x24_the_header_help_and_hccl_lines_keep_their_words() -> None:
    text = top_golden.render(80, 24)
    assert text.splitlines()[0].endswith("up 9.3 s")
    assert "communicator" in text and "29.1.0.10%enp_60000_0_" in text and "(8 ranks)" in text
    help_text = top_golden.render(80, 24, TopState(help=True))
    assert "codes, link, optics, ECC, HCCS, processes" in " ".join(help_text.split())


def test_at_80x24_no_row_is_left_empty_while_there_is_something_to_show() -> None:
    lines = frame(FETCHED, History(), TopState(), width=80, height=24, node="demo-node", now=top_golden.NOW)
    assert len(lines) == 24
    assert all("".join(text for text, _ in line).strip() for line in lines)


@pytest.mark.parametrize("width", [60, 64, 70])
def test_a_narrow_terminal_keeps_the_down_link_and_drops_the_codes_first(width: int) -> None:
    text = top_golden.render(width, 24)
    title = next(line for line in text.splitlines() if line.startswith("NPU"))
    assert "Link" in title and "Health" in title and "Codes" not in title
    assert " DOWN" in next(line for line in text.splitlines() if line.startswith("   6 "))


def test_columns_go_in_their_priority_order() -> None:
    rows = parse_view(samples_of(TEXT)).rows
    keeps = {column.title: column.keep for column in columns(rows, 400, History(), TopState())}
    for width in range(20, 400):
        shown = {column.title for column in columns(rows, width, History(), TopState())}
        gone = set(keeps) - shown
        assert all(keeps[kept] >= keeps[dropped] for kept in shown for dropped in gone), (width, gone)
        assert sum(column.width for column in columns(rows, width, History(), TopState())) <= max(width, 5)


def test_hbm_is_a_bar_of_used_over_total() -> None:
    row = next(line for line in top_golden.render(80, 24).splitlines() if line.startswith("   3 "))
    view = parse_view(samples_of(TEXT))
    three = next(r for r in view.rows if r.npu == 3)
    assert three.hbm_used is not None and three.hbm_total
    assert f"░ {three.hbm_used / three.hbm_total * 100:3.0f}% " in row
    assert row.split()[1] != row.split()[3]  # the AI Core bar and the HBM bar are two bars


def test_the_process_list_names_each_process_and_says_how_many_it_leaves_out() -> None:
    text = top_golden.render(120, 24)
    assert "Processes   NPU     PID USER         HBM  CPU%     TIME  COMMAND" in text
    listed = [line for line in text.splitlines() if line.endswith("python3")]
    assert listed[0].split()[:4] == ["7", "41207", "-", "11.0G"]  # the most HBM first
    short = top_golden.render(120, 17)
    shown = [line for line in short.splitlines() if line.endswith("python3")]
    assert 0 < len(shown) < 8 and " 41207 " in shown[0]
    assert f"and {8 - len(shown)} more (enter on an NPU lists its own)" in short


def test_without_per_process_series_one_line_says_how_to_list_them() -> None:
    text = "\n".join(line for line in TEXT.splitlines() if not line.startswith("npu_process_memory_bytes"))
    shown = top_golden.render(80, 24, text=text)
    (line,) = [line for line in shown.splitlines() if line.startswith("Processes")]
    assert line == "Processes 8; list them with collectors.npu_smi.per_process_metrics: true"
    none = "\n".join(line.replace("} 1.0", "} 0.0") if line.startswith("npu_processes{") else line
                     for line in text.splitlines())
    assert "Processes none on the NPUs" in top_golden.render(80, 24, text=none)


def test_rows_that_do_not_fit_are_counted_where_they_are() -> None:
    first = top_golden.render(40, 10).splitlines()
    assert [line.split()[0] for line in first[4:8]] == ["0", "1", "2", "3"]
    assert first[8] == "4 more NPUs: 4 below (up/down scrolls)"
    middle = top_golden.render(40, 10, TopState(selected=5)).splitlines()
    assert [line.split()[0] for line in middle[4:8]] == ["2", "3", "4", "5"]
    assert middle[8] == "4 more NPUs: 2 above, 2 below (up/down"  # cut at a space, never in a word
    assert "more NPUs" not in top_golden.render(80, 24)  # every NPU shows: nothing to count


def _history(views: int) -> History:
    history = History()
    view = parse_view(samples_of(TEXT))
    for step in range(views):
        for row in view.rows:
            row.aicore = (step % 8) / 7
        history.add(view)
    return history


@pytest.mark.parametrize("width", [100, 120, 160])
def test_history_shows_at_100_to_160_columns_under_the_table(width: int) -> None:
    text = plain(frame(FETCHED, _history(40), TopState(), width=width, height=40, node="n", now=top_golden.NOW))
    lines = text.splitlines()
    title = next(index for index, line in enumerate(lines) if line.startswith("History"))
    assert "AI Core" in lines[title] and "Temp" in lines[title]
    assert all(len(line) <= width for line in lines)
    marks = [line for line in lines[title + 1:title + 9]]
    assert [line.split()[0] for line in marks] == [str(npu) for npu in range(8)]
    assert all("▁▂▃▄▅▆▇█" in line for line in marks), marks  # the last refreshes, each a mark
    assert "AI Core history" not in text  # the table's own columns need 200: one history, not two


def test_history_gives_way_to_the_table_and_the_process_list() -> None:
    assert "History" not in plain(frame(FETCHED, _history(40), TopState(), width=120, height=24, node="n",
                                        now=top_golden.NOW))
    wide = plain(frame(FETCHED, _history(40), TopState(), width=200, height=60, node="n", now=top_golden.NOW))
    assert "AI Core history" in wide and "\nHistory" not in wide


def test_the_header_names_the_node_not_a_loopback_address() -> None:
    import argparse
    import socket

    from agent.core.config import load_config
    from agent.top.cli import _node_name

    config = load_config(None)
    local = argparse.Namespace(url="http://127.0.0.1:9611")
    assert _node_name(local, config) == str(config.labels.get("node") or socket.gethostname())
    assert _node_name(argparse.Namespace(url="http://node-7:9611"), config) == "node-7"
    named = parse_view(samples_of('npuwatch_build_info{version="1",python="3",node="gpu-a-17"} 1\n'))
    assert _node_name(local, config, named) == "gpu-a-17"  # the agent's own node label first
