"""The node page as one HTML document: inline CSS, inline SVG, no script, nothing fetched.

Every value that comes from outside (labels, tool output, log text, collector errors, the node name, runbook
URLs) goes through ``html.escape``; the server (``agent.web.server``) sends the page with a
Content-Security-Policy that allows no script and no fetch, so a value that slipped through could not act.
"""

from __future__ import annotations

import html
import time
from collections.abc import Iterable

from agent import __version__
from agent.core.history import HOUR_S
from agent.core.humanize import duration, size
from agent.health.verdict import SEVERITY_WORDS
from agent.web.page.charts import line_chart, state_chart
from agent.web.page.model import ChipRow, FindingRow, NodeView

__all__ = ["render_page"]

_CSS = """
body{font:14px/1.4 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:0;color:#1d2330;background:#f5f6f8}
header{background:#fff;border-bottom:1px solid #d9dde3;padding:12px 20px;display:flex;gap:16px;align-items:center}
header h1{font-size:18px;margin:0}
header nav{margin-left:auto;font-size:13px}
header nav a{margin-left:12px}
main{padding:14px 20px}
a{color:#1f5fbf}
.verdict{background:#fff;border:1px solid #d9dde3;border-left:6px solid #8a94a6;padding:10px 14px;margin-bottom:14px}
.verdict.fail{border-left-color:#c62828}.verdict.warn{border-left-color:#e0a000}.verdict.ok{border-left-color:#2e7d32}
.verdict p{margin:4px 0}
.verdict .summary{font-size:16px;font-weight:600}
.muted{color:#5d6675;font-size:12px}
.badge{display:inline-block;min-width:44px;text-align:center;padding:1px 6px;border-radius:3px;font-weight:700;
font-size:12px;color:#fff;background:#8a94a6}
.badge.fail{background:#c62828}.badge.warn{background:#b07d00}.badge.ok{background:#2e7d32}
.badge.unknown{background:#6b7280}
h2{font-size:15px;margin:18px 0 6px}
table{border-collapse:collapse;background:#fff;border:1px solid #d9dde3;width:100%}
th,td{padding:4px 6px;border-bottom:1px solid #eceef2;text-align:left;vertical-align:middle;white-space:nowrap}
th{background:#eef0f4;font-size:12px;font-weight:600}
td.num{text-align:right;font-variant-numeric:tabular-nums}
td.wrap{white-space:normal}
tr.fail td:first-child{box-shadow:inset 4px 0 #c62828}tr.warn td:first-child{box-shadow:inset 4px 0 #e0a000}
tr.unknown td:first-child{box-shadow:inset 4px 0 #6b7280}
td.cause{min-width:130px;max-width:190px}
.finding{display:inline-block;margin:1px 4px 1px 0;padding:0 5px;border-radius:3px;font-size:12px;background:#eceef2}
.finding.fail{background:#fde3e3;color:#8e1b1b}.finding.warn{background:#fdf1d0;color:#6e4d00}
.stale{color:#a05a00;font-style:italic}
.code{font-family:ui-monospace,Menlo,Consolas,monospace;font-size:12px}
.down{color:#c62828;font-weight:600}.up{color:#2e7d32}
svg.spark{display:block}
svg.spark .frame{fill:#fafbfc;stroke:#e1e4ea}
svg.spark polyline{fill:none;stroke:#1f5fbf;stroke-width:1.3}
svg.spark circle{fill:#1f5fbf}
svg.spark .limit{stroke:#c62828;stroke-width:.8;stroke-dasharray:3 2}
svg.spark rect.up{fill:#7cc47f}svg.spark rect.down{fill:#c62828}
.collectors{display:grid;grid-template-columns:repeat(auto-fill,minmax(200px,1fr));gap:6px}
.collector{background:#fff;border:1px solid #d9dde3;border-left:4px solid #2e7d32;padding:4px 8px;font-size:13px}
.collector b{font-size:12px;color:#2e7d32}
.collector.state-down,.collector.state-degraded{border-left-color:#c62828}
.collector.state-down b,.collector.state-degraded b{color:#c62828}
.collector.state-pending,.collector.state-no_data{border-left-color:#8a94a6}
.collector.state-pending b,.collector.state-no_data b{color:#5d6675}
.collector .reason{color:#8e1b1b;font-size:12px;white-space:normal;overflow-wrap:anywhere}
footer{padding:10px 20px 20px;color:#5d6675;font-size:12px}
"""


def e(value: object) -> str:
    """Escaped for text and for attribute values (quotes too)."""
    return html.escape(str(value), quote=True)


def _age(now: float, at: float | None) -> str:
    return "never" if at is None else f"{duration(max(0.0, now - at))} ago"


def _link(url: str | None, text: str) -> str:
    if not url:
        return ""
    return f'<a href="{e(url)}" rel="noreferrer">{e(text)}</a>'


def _verdict(view: NodeView) -> str:
    verdict = view.verdict
    if verdict is None:
        return ('<section class="verdict unknown" id="verdict" data-status="unknown"><p class="summary">'
                '<span class="badge unknown">WAIT</span> not judged yet: the first collection round has not '
                'finished</p></section>')
    parts = [f'<section class="verdict {e(verdict.status)}" id="verdict" data-status="{e(verdict.status)}" '
             f'data-cause="{e(verdict.cause or "")}" data-npu="{e("" if verdict.npu is None else verdict.npu)}">',
             f'<p class="summary"><span class="badge {e(verdict.status)}">{e(verdict.word)}</span> '
             f'{e(verdict.text)}</p>']
    if verdict.action:
        parts.append(f"<p><b>Next:</b> {e(verdict.action)}</p>")
    details = [f"judged {_age(view.now, view.judged_at)}"]
    if verdict.cause:
        details.append(f"cause <span class=\"code\">{e(verdict.cause)}</span>")
    if verdict.runbook:
        details.append(_link(verdict.runbook, "runbook"))
    parts.append(f'<p class="muted">{" &middot; ".join(details)}</p></section>')
    return "".join(parts)


def _number(value: float | None, text: str, stale: bool, title: str = "") -> str:
    if value is None:
        return '<td class="num muted">&ndash;</td>'
    css = "num stale" if stale else "num"
    return f'<td class="{css}"{_title(title)}>{e(text)}</td>'


def _title(text: str) -> str:
    """A ``title`` attribute (a tooltip), or nothing for no text."""
    return f' title="{e(text)}"' if text else ""


def _stale_title(row: ChipRow, source: str) -> str:
    mark = row.stale.get(source)
    return "" if mark is None else f"last read {duration(mark.age_s)} ago; its collector: {mark.why}"


def _findings_cell(row: ChipRow) -> str:
    if not row.findings and not row.cause:
        return '<td class="wrap muted">&ndash;</td>'
    marks = [f'<span class="finding {e(f.status)}" data-kind="{e(f.cause)}" title="{e(f.detail)}">'
             f"{e(f.label)}</span>" for f in row.findings]
    if not marks:  # a cause without a finding on this chip (a check that could not judge it)
        marks = [f'<span class="finding" data-kind="{e(row.cause)}">{e(row.cause_label or row.cause)}</span>']
    return f'<td class="wrap cause">{"".join(marks)}</td>'


def _codes_cell(row: ChipRow) -> str:
    if not row.codes:
        return '<td class="muted">&ndash;</td>'
    stale = " stale" if "npu_smi_health" in row.stale else ""
    codes = "<br>".join(f'<span class="code">{e(code)}</span> <span class="muted">{e(handling)}</span>'
                        for code, handling in row.codes)
    return f'<td class="codes{stale}"{_title(_stale_title(row, "npu_smi_health"))}>{codes}</td>'


def _link_cell(row: ChipRow) -> str:
    if row.link is None:
        return '<td class="muted">&ndash;</td>'
    state, css = ("up", "up") if row.link else ("DOWN", "down")
    stale = " stale" if "hccn_link" in row.stale else ""
    return f'<td class="{css}{stale}"{_title(_stale_title(row, "hccn_link"))}>{state}</td>'


def _charts(row: ChipRow, now: float) -> str:
    series = row.history
    name = f"NPU {row.npu} chip {row.chip}"
    if series is None:
        return '<td colspan="4" class="muted">no history yet</td>'
    cells = [
        line_chart(series.temperature, now, window_s=HOUR_S, low=30.0, high=90.0,
                   title=f"{name} temperature, last hour (°C)"),
        line_chart(series.aicore, now, window_s=HOUR_S, low=0.0, high=1.0, title=f"{name} AI Core use, last hour"),
        line_chart(series.hbm, now, window_s=HOUR_S, low=0.0, high=1.0, title=f"{name} HBM use, last hour"),
        state_chart(series.link, now, window_s=HOUR_S, title=f"{name} RoCE link state, last hour"),
    ]
    return "".join(f"<td>{cell}</td>" for cell in cells)


def _used_of(used: float, total: float | None) -> str:
    """``35.4 / 64 GiB`` (one unit when both read best in it), ``512 MiB / 64 GiB``, or ``35.4 GiB``."""
    if not total:
        return size(used)
    used_text, total_text = size(used), size(total)
    unit = total_text.rsplit(" ", 1)[-1]
    if used_text.endswith(" " + unit):
        return f"{used_text.rsplit(' ', 1)[0]} / {total_text}"
    return f"{used_text} / {total_text}"


def _chip_row(row: ChipRow, now: float, show_chip: bool) -> str:
    status = row.status if row.status in SEVERITY_WORDS else "unknown"
    name = f"NPU {row.npu}" + (f" chip {row.chip}" if show_chip else "")
    info_stale = "npu_smi_info" in row.stale
    info_title = _stale_title(row, "npu_smi_info")
    hbm_text = "" if row.hbm_used is None else _used_of(row.hbm_used, row.hbm_total)
    cells = [
        f"<td><b>{e(name)}</b></td>",
        f'<td><span class="badge {e(status)}">{e(SEVERITY_WORDS[status])}</span></td>',
        _findings_cell(row),
        _number(row.temperature, "" if row.temperature is None else f"{row.temperature:.0f} °C", info_stale,
                info_title),
        _number(row.aicore, "" if row.aicore is None else f"{row.aicore * 100:.0f} %", info_stale, info_title),
        _number(row.hbm_used, hbm_text, info_stale, info_title),
        _number(row.power, "" if row.power is None else f"{row.power:.0f} W", info_stale, info_title),
        _link_cell(row),
        _codes_cell(row),
        _charts(row, now),
    ]
    return (f'<tr class="{e(status)}" id="npu-{row.npu}-chip-{row.chip}" data-npu="{row.npu}" '
            f'data-chip="{row.chip}" data-status="{e(status)}" data-cause="{e(row.cause)}">{"".join(cells)}</tr>')


def _chips_table(view: NodeView) -> str:
    if not view.chips:
        return '<p class="muted" id="npus">No NPU listed yet (npu-smi has not answered since the agent started).</p>'
    show_chip = any(row.chip != 0 for row in view.chips)
    head = ("<tr><th>NPU</th><th>status</th><th>cause</th><th>temp</th><th>AI Core</th><th>HBM</th><th>power</th>"
            "<th>link</th><th>error codes</th><th>temp, 1 h</th><th>AI Core, 1 h</th><th>HBM, 1 h</th>"
            "<th>link, 1 h</th></tr>")
    body = "".join(_chip_row(row, view.now, show_chip) for row in view.chips)
    return f'<table id="npus"><thead>{head}</thead><tbody>{body}</tbody></table>'


def _findings_table(rows: Iterable[FindingRow], now: float) -> str:
    rows = list(rows)
    if not rows:
        return '<p class="muted" id="findings">No active finding.</p>'
    head = "<tr><th>status</th><th>fault</th><th>where</th><th>since</th><th>what was seen</th><th>runbook</th></tr>"
    body = "".join(
        f'<tr class="{e(row.status)}" data-kind="{e(row.cause)}" data-npu="{e("" if row.npu is None else row.npu)}">'
        f'<td><span class="badge {e(row.status)}">{e(SEVERITY_WORDS.get(row.status, row.status))}</span></td>'
        f"<td>{e(row.label)}</td><td>{e(row.where)}</td><td>{e(_age(now, row.since))}</td>"
        f'<td class="wrap">{e(row.detail)}</td><td>{_link(row.runbook, "runbook") or "&ndash;"}</td></tr>'
        for row in rows)
    return f'<table id="findings"><thead>{head}</thead><tbody>{body}</tbody></table>'


def _collectors(view: NodeView) -> str:
    up = sum(1 for state in view.collectors if state.get("state") == "up")
    cards = []
    for state in view.collectors:
        age = state.get("last_success_age_seconds")
        when = "never read" if not isinstance(age, (int, float)) else f"read {duration(float(age))} ago"
        name, word = str(state.get("name", "?")), str(state.get("state", "?"))
        reason = state.get("reason") or ""
        why = f'<div class="reason">{e(reason)}</div>' if reason else ""
        cards.append(f'<div class="collector state-{e(word)}" data-collector="{e(name)}" data-state="{e(word)}">'
                     f'<span class="code">{e(name)}</span> <b>{e(word)}</b>'
                     f'<div class="muted">{e(when)}</div>{why}</div>')
    return (f'<h2>Collectors: {up} of {len(view.collectors)} up</h2>'
            f'<div id="collectors" class="collectors">{"".join(cards)}</div>')


def render_page(view: NodeView) -> bytes:
    status = view.verdict.word if view.verdict is not None else "WAIT"
    rendered = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(view.now))
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f'<meta http-equiv="refresh" content="{int(view.refresh_s)}">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        '<link rel="icon" href="data:,">',
        f"<title>{e(status)} {e(view.node)} - npuwatch</title>",
        f"<style>{_CSS}</style></head><body>",
        f'<header><h1>npuwatch &middot; <span id="node">{e(view.node)}</span></h1>'
        '<nav><a href="/">reload</a><a href="/metrics">/metrics</a><a href="/readyz">/readyz</a></nav></header>',
        "<main>",
        _verdict(view),
        _chips_table(view),
        "<h2>Findings</h2>",
        _findings_table(view.findings, view.now),
        _collectors(view),
        "</main>",
        f"<footer>npuwatch {e(__version__)} &middot; rendered {e(rendered)} &middot; reloads every "
        f"{int(view.refresh_s)} s &middot; charts: the agent's in-memory history of the last hour</footer>",
        "</body></html>\n",
    ]
    return "".join(parts).encode("utf-8")
