"""Exact expected records for every parsed capture in the shared corpus (tools/), kept in the repository.

Each corpus capture a parser reads has ``tests/fixtures/corpus_golden/<capture name>.json``: what the parser
returns for it, every field. ``tests/conformance/test_corpus_golden.py`` compares; a capture with no golden file
fails until someone looks at its records and runs ``python -m tests.support.corpus_golden`` (never done by a test
run), then reviews the diff. Only numbers and fields derived from the captures live here, not the captures.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

from collectors import (
    ascend_dmi,
    ascend_dmi_diag,
    hccn_ip,
    hccn_link,
    hccn_link_stat,
    hccn_net_health,
    hccn_optical,
    hccn_stat,
    npu_smi_board,
    npu_smi_common,
    npu_smi_ecc,
    npu_smi_hccs,
    npu_smi_health,
    npu_smi_info,
    npu_smi_list,
    npu_smi_mapping,
    npu_smi_memory,
    npu_smi_power,
    npu_smi_temp,
    npu_smi_topo,
    npu_smi_usages,
)
from collectors.base import ToolError
from collectors.hccl import ranktable as hccl_ranktable
from tests.support.golden import report_rewritten, write_if_changed
from tests.support.paths import CORPUS, FIXTURES

TOOLS = CORPUS / "tools"
GOLDEN = FIXTURES / "corpus_golden"


def _hccn_conf(text: str) -> Any:
    # The blogger's literal "..." line stands for elided devices (INDEX.md); a real file has none.
    return hccn_ip.parse_hccn_conf("\n".join(line for line in text.splitlines() if line.strip() != "..."))


# Capture-name prefix -> parser (the longest matching prefix wins).
PARSERS: dict[str, Callable[[str], Any]] = {
    "npu-smi_info__": npu_smi_info.parse,
    "npu-smi_info_-m__": npu_smi_mapping.parse,
    "npu-smi_info_-l__": npu_smi_list.parse,
    "npu-smi_info_-t_topo__": npu_smi_topo.parse,
    "npu-smi_info_-t_usages__": npu_smi_usages.parse,
    "npu-smi_info_-t_common__": npu_smi_common.parse,
    "npu-smi_info_-t_power__": npu_smi_power.parse,
    "npu-smi_info_-t_temp__": npu_smi_temp.parse,
    "npu-smi_info_-t_sensors__": npu_smi_memory.parse,
    "npu-smi_info_-t_memory__": npu_smi_memory.parse,
    "npu-smi_info_-t_ecc__": npu_smi_ecc.parse,
    "npu-smi_info_-t_health__": npu_smi_health.parse,
    "npu-smi_info_-t_board__": npu_smi_board.parse,
    "npu-smi_info_-t_board_-c0__": npu_smi_board.parse,
    "npu-smi_info_-t_hccs__": npu_smi_hccs.parse,
    "hccn_tool_-link_-g__": hccn_link.parse,
    "hccn_tool_-link_stat_-g__": hccn_link_stat.parse,
    "hccn_tool_-net_health_-g__": hccn_net_health.parse,
    "hccn_tool_-optical_-g__": hccn_optical.parse,
    "hccn_tool_-stat_-g__": hccn_stat.parse,
    "hccn_tool_-ip_-g__": hccn_ip.parse,
    "hccn_tool_-g_-link_-u_-p__": hccn_link.parse,
    "hccn_tool_-g_-link_stat__": hccn_link_stat.parse,
    "hccn_tool_-g_-stat_-u_-p__": hccn_stat.parse,
    "ascend-dmi_-f_": ascend_dmi.parse_flops,
    "ascend-dmi_-dg_": ascend_dmi_diag.parse,
    "ascend-dmi_--dg_": ascend_dmi_diag.parse,
    "hccl-ranktable_": hccl_ranktable.parse,
    "cat_etc-hccn.conf__": _hccn_conf,
}


def parser_for(name: str) -> Callable[[str], Any] | None:
    matches = [prefix for prefix in PARSERS if name.startswith(prefix)]
    return PARSERS[max(matches, key=len)] if matches else None


def captures() -> list[Path]:
    if not TOOLS.is_dir():
        return []
    return sorted(path for path in TOOLS.iterdir() if parser_for(path.name) is not None)


def _plain(value: Any) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, dict):
        return {str(key): _plain(item) for key, item in sorted(value.items(), key=lambda kv: str(kv[0]))}
    if isinstance(value, (list, tuple)):
        return [_plain(item) for item in value]
    if isinstance(value, (dt.datetime, dt.date)):
        return value.isoformat()
    if isinstance(value, float) and math.isnan(value):  # NaN never leaves a parser, but say so if it does
        return "NaN"
    return value


def records(path: Path) -> Any:
    """What the capture's parser returns, as plain JSON data (a tool error becomes {"tool_error": ...})."""
    parser = parser_for(path.name)
    assert parser is not None, path.name
    try:
        return _plain(parser(path.read_text(encoding="utf-8")))
    except ToolError as exc:
        return {"tool_error": str(exc)}


def golden_path(path: Path) -> Path:
    return GOLDEN / f"{path.name}.json"


def regenerate() -> list[Path]:
    changed: list[Path] = []
    for path in captures():
        write_if_changed(golden_path(path), json.dumps(records(path), indent=1, sort_keys=True,
                                                       ensure_ascii=False) + "\n", changed)
    return changed


if __name__ == "__main__":
    report_rewritten(regenerate())
