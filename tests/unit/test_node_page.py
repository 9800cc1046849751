"""The node page (agent.web.page): what it gathers from the agent's state and how it writes it.

The judgement here is made by the agent's own functions (``agent.health.verdict.lead`` and the exported
``verdict_samples``) over hand-made check results, as the ``verdict`` job makes it every round.
"""

from __future__ import annotations

import html
import re
from dataclasses import dataclass
from html.parser import HTMLParser

from agent.core.history import NodeHistory
from agent.core.snapshot import SnapshotStore
from agent.health.results import CheckResult, Result
from agent.health.status import FAIL, PASS
from agent.health.thresholds import FAULT_KINDS
from agent.health.verdict import Verdict, lead, runbook_url
from agent.health.verdict_metrics import finding_keys, verdict_samples
from agent.web.page.charts import GAP_S, WIDTH, line_chart, state_chart
from agent.web.page.model import build_view
from agent.web.page.render import render_page
from collectors.base import ChipRef, Sample, label_pairs

HOSTILE = '<script>alert("x")</script><img src=x onerror=alert(1)>'
NOW = 10_000.0


@dataclass(frozen=True)
class Judged:
    checks: tuple[CheckResult, ...]
    verdict: Verdict
    at: float
    since: dict[tuple[str, str, str], float]


def chip(metric: str, npu: int, value: float, **labels: str) -> Sample:
    return Sample(metric, label_pairs(npu=npu, chip=0, **labels), value)


def checks_with_faults() -> tuple[CheckResult, ...]:
    hot = Result(FAIL, "NPU 4: npu-smi info: 97 C, over 95 C", npu=4, chip=0, kind="chip_too_hot")
    down = Result(FAIL, "NPU 6: hccn_tool -i 6 -link -g says DOWN", npu=6, kind="link_down")
    return (CheckResult("temperature", FAIL, "1 chip too hot", (hot, Result(PASS, "NPU 5: 50 C", npu=5, chip=0))),
            CheckResult("roce_link", FAIL, "1 link down", (down,)))


def agent_state(checks: tuple[CheckResult, ...], *, code: str = "80E18402", process_error: str = "",
                clock: list[float] | None = None) -> tuple[SnapshotStore, Judged, NodeHistory]:
    """A store as the agent's collectors leave it, the judgement of ``checks`` and its exported samples;
    ``clock``: the store's time, to move afterwards."""
    now = clock if clock is not None else [NOW]
    store = SnapshotStore(lambda: now[0])
    history = NodeHistory()
    store.add_listener(history.listen)
    for source in ("npu_smi_info", "hccn_link", "npu_smi_health", "verdict"):
        store.register(source, 10.0)
    table = [sample for npu in (4, 5, 6) for sample in (
        chip("npu_temperature_celsius", npu, 97.0 if npu == 4 else 50.0),
        chip("npu_aicore_utilization_ratio", npu, 0.5), chip("npu_power_watts", npu, 250.0),
        chip("npu_hbm_used_bytes", npu, 16 * 2**30), chip("npu_hbm_total_bytes", npu, 64 * 2**30))]
    store.put_success("npu_smi_info", table, None, NOW - 1, 0.5)
    store.put_success("hccn_link", [chip("npu_roce_link_up", npu, 0.0 if npu == 6 else 1.0) for npu in (4, 5, 6)],
                      None, NOW - 1, 0.5)
    store.put_success("npu_smi_health", [chip("npu_error_code_active", 5, 1.0, code=code, handling="SeparateNPU")],
                      None, NOW - 1, 0.5)
    if process_error:
        store.put_failure("npu_smi_health", "exit", process_error, NOW, 0.5)
    verdict = lead(checks)
    since = {key: NOW - 60 for key in finding_keys(checks)}
    chips = [ChipRef(npu, 0) for npu in (4, 5, 6)]
    store.put_success("verdict", verdict_samples(checks, verdict, chips, since), None, NOW, 0.01)
    return store, Judged(checks, verdict, NOW, since), history


class Rows(HTMLParser):
    """Each element's attributes by id, and the text inside each table row of the NPU table."""

    def __init__(self) -> None:
        super().__init__()
        self.by_id: dict[str, dict[str, str | None]] = {}
        self.row_text: dict[str, str] = {}
        self._row: str | None = None
        self.scripts = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = dict(attrs)
        if tag == "script":
            self.scripts += 1
        if found.get("id"):
            self.by_id[str(found["id"])] = found
        if tag == "tr" and str(found.get("id", "")).startswith("npu-"):
            self._row = str(found["id"])
            self.row_text[self._row] = ""

    def handle_endtag(self, tag: str) -> None:
        if tag == "tr":
            self._row = None

    def handle_data(self, data: str) -> None:
        if self._row is not None:
            self.row_text[self._row] += data + " "


def page_of(store: SnapshotStore, judged: Judged | None, history: NodeHistory, node: str = "node-a") -> str:
    return render_page(build_view(store, judged, history, node=node)).decode("utf-8")


def parsed(page: str) -> Rows:
    rows = Rows()
    rows.feed(page)
    return rows


def test_each_chip_row_shows_its_status_and_cause() -> None:
    store, judged, history = agent_state(checks_with_faults())
    rows = parsed(page_of(store, judged, history))
    assert rows.by_id["npu-4-chip-0"]["data-status"] == "fail"
    assert rows.by_id["npu-4-chip-0"]["data-cause"] == "chip_too_hot"
    assert "chip too hot" in rows.row_text["npu-4-chip-0"]
    assert "97 °C" in rows.row_text["npu-4-chip-0"]
    assert rows.by_id["npu-6-chip-0"]["data-cause"] == "link_down"
    assert "RoCE link down" in rows.row_text["npu-6-chip-0"] and "DOWN" in rows.row_text["npu-6-chip-0"]
    assert rows.by_id["npu-5-chip-0"]["data-status"] == "ok"
    assert "80E18402" in rows.row_text["npu-5-chip-0"] and "SeparateNPU" in rows.row_text["npu-5-chip-0"]
    assert "16 / 64 GiB" in rows.row_text["npu-5-chip-0"]


def test_the_verdict_is_the_agents_lead() -> None:
    store, judged, history = agent_state(checks_with_faults())
    page = page_of(store, judged, history)
    verdict = parsed(page).by_id["verdict"]
    assert (verdict["data-status"], verdict["data-cause"], verdict["data-npu"]) == ("fail", "link_down", "6")
    assert judged.verdict.text.split(" (")[0] in page  # "RoCE link down on NPU 6"
    assert 'href="/metrics"' in page and 'href="/readyz"' in page
    # each finding links its runbook, the lead's too
    assert page.count("alerts/runbooks/NPURoCELinkDown.md") == 2
    hot = runbook_url(FAULT_KINDS["chip_too_hot"].runbook_for("temperature"))
    assert hot is not None and f'href="{html.escape(hot)}"' in page


def test_a_hostile_label_is_escaped_everywhere() -> None:
    store, judged, history = agent_state(checks_with_faults(), code=HOSTILE, process_error=HOSTILE)
    page = page_of(store, judged, history, node=HOSTILE)
    assert "<script" not in page and "<img" not in page and "onerror=alert(1)>" not in page
    assert "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;" in page
    rows = parsed(page)
    assert rows.scripts == 0
    assert HOSTILE in rows.row_text["npu-5-chip-0"]  # shown as text, on its chip's row
    assert 'title="last read' in page  # the health readings are marked stale: the last run failed


def test_readings_older_than_their_max_age_are_not_shown() -> None:
    clock = [NOW]
    store, _judged, history = agent_state(checks_with_faults(), clock=clock)
    clock[0] = NOW + 3600  # every collector silent for an hour: nothing it read is served any more
    page = page_of(store, None, history)
    assert "97 °C" not in page and 'id="npu-4-chip-0"' not in page
    assert "not judged yet" in page


def test_no_judgement_yet_and_no_chips() -> None:
    page = page_of(SnapshotStore(lambda: NOW), None, NodeHistory())
    rows = parsed(page)
    assert rows.by_id["verdict"]["data-status"] == "unknown"
    assert "No NPU listed yet" in page
    assert '<meta http-equiv="refresh"' in page


def test_the_page_has_no_script_and_fetches_nothing() -> None:
    store, judged, history = agent_state(checks_with_faults())
    page = page_of(store, judged, history)
    assert "<script" not in page.lower()
    assert not re.search(r'\ssrc=|<link[^>]+href="(?!data:)', page)
    assert not re.search(r"url\(", page)


def test_charts_draw_the_last_hour_with_gaps() -> None:
    points = [(NOW - 3000.0, 40.0), (NOW - 2900.0, 45.0), (NOW - 2000.0, 80.0), (NOW - 1900.0, 82.0)]
    svg = line_chart(points, NOW, window_s=3600.0, low=30.0, high=90.0, title="t <b>")
    assert svg.count("<polyline") == 2  # 900 s between the pairs is more than GAP_S
    assert GAP_S < 900
    assert "t &lt;b&gt;" in svg
    empty = line_chart([(NOW - 7200.0, 1.0)], NOW, window_s=3600.0, low=0.0, high=1.0, title="x")
    assert "no readings in the last hour" in empty and "<polyline" not in empty
    bands = state_chart([(NOW - 120.0, 1.0), (NOW - 60.0, 0.0)], NOW, window_s=3600.0, title="link")
    assert bands.count('class="up"') == 1 and bands.count('class="down"') == 1


def test_a_chart_draws_one_point_per_pixel_keeping_the_highest() -> None:
    points = [(NOW - 3600.0 + 10 * i, 50.0) for i in range(360)]
    points[200] = (points[200][0], 99.0)  # one reading of a spike
    svg = line_chart(points, NOW, window_s=3600.0, low=30.0, high=90.0, title="temperature")
    drawn = re.search(r'points="([^"]+)"', svg)
    assert drawn is not None
    ys = [float(pair.split(",")[1]) for pair in drawn.group(1).split()]
    assert len(ys) <= WIDTH
    assert min(ys) == 1.5  # the spike is the top of the chart: kept, not averaged away
    link = [(NOW - 3600.0 + 60 * i, 1.0) for i in range(60)]
    link[50] = (link[50][0], 0.0)
    bands = state_chart(link, NOW, window_s=3600.0, title="link")
    assert [match.group(1) for match in re.finditer(r'<rect class="(up|down)"', bands)] == ["up", "down", "up"]


def test_the_page_draws_the_recorded_history() -> None:
    store, judged, history = agent_state(checks_with_faults())
    page = page_of(store, judged, history)
    row = page[page.index('id="npu-4-chip-0"'):page.index('id="npu-5-chip-0"')]
    assert row.count("<svg") == 4
    assert 'class="down"' in page[page.index('id="npu-6-chip-0"'):]
