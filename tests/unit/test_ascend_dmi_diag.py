"""``ascend-dmi --dg`` fault-diagnosis parser on synthetic fixtures (tests/fixtures/ascend_dmi_diag/).

FORMATS (where each detail comes from):
- Layout (Summary/Hardware/Software headers at column 0, key at 4 spaces, status at 8, the single-space
  line after ``Time``, ``*** `` detail lines, ``(Y/N)y`` glued prompt): seen in the corpus's seven vendor
  doc examples (``tools/ascend-dmi_*dg*``). None of them is a user capture.
- Per-item status words: from the MindCluster 7.3 ToolBox guide tables only (toolboxug_0159 signalQuality,
  0160 network, 0161 device, 0162 driver, 0163 cann, 0155 bandwidth). The corpus shows only HEALTH, PASS
  and FAIL; GENERAL/IMPORTANT/EMERGENCY_WARN, WARN, SKIP and INFO come from the docs alone.
- More than one ``***`` detail line per item, details on a non-FAIL item, the Software section before
  Hardware in one output, and the answer ``n`` at the prompt: assumed. No document shows them.
- ``-fmt json`` (``DiagnosisItems`` / ``sub_items``, toolboxug_0204) is not covered.
"""

from __future__ import annotations

from datetime import datetime

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from collectors import ascend_dmi_diag
from collectors.ascend_dmi_diag import STATUS_VERDICTS, DiagItem
from collectors.base import ParseError
from tests.support import paths

FIXTURES = paths.FIXTURES / "ascend_dmi_diag"


def fixture(name: str) -> str:
    return (FIXTURES / name).read_text()


def test_mixed_default_run_keeps_every_item_in_order() -> None:
    diagnosis = ascend_dmi_diag.parse(fixture("mixed_default_run.txt"))
    assert diagnosis.summary is not None
    assert (diagnosis.summary.arch, diagnosis.summary.mode) == ("x86_64", "Atlas 800T A2")
    assert diagnosis.summary.time == datetime(2026, 1, 14, 3, 7, 59)
    assert [(i.section, i.name, i.status, i.verdict) for i in diagnosis.items] == [
        ("Software", "cann", "PASS", "pass"),
        ("Hardware", "driver", "IMPORTANT_WARN", "warn"),
        ("Hardware", "device", "EMERGENCY_WARN", "warn"),
        ("Hardware", "network", "INFO", "info"),
        ("Hardware", "signalQuality", "SKIP", "skip"),
        ("Hardware", "hbm", "FAIL", "fail"),
        ("Hardware", "bandwidth", "PASS", "pass"),
        ("Hardware", "aiflops", "DEGRADED", "unknown"),
        ("Hardware", "ubLink", "PASS", "pass"),
    ]


def test_fail_details_are_kept_without_the_marker() -> None:
    diagnosis = ascend_dmi_diag.parse(fixture("mixed_default_run.txt"))
    hbm = diagnosis.item("hbm")
    assert hbm is not None
    assert hbm.details == ("Device 5: on-chip memory diagnosis failed.", "Device 7: on-chip memory diagnosis failed.")
    driver = diagnosis.item("driver")
    assert driver is not None
    assert driver.details == ("Device 2: the driver reported an important warning.",)


def test_unknown_status_and_unknown_item_are_flagged_not_dropped() -> None:
    diagnosis = ascend_dmi_diag.parse(fixture("mixed_default_run.txt"))
    aiflops, ub_link = diagnosis.item("aiflops"), diagnosis.item("ubLink")
    assert aiflops is not None and ub_link is not None
    assert (aiflops.known_item, aiflops.known_status, aiflops.is_problem) == (True, False, True)
    assert (ub_link.known_item, ub_link.known_status, ub_link.is_problem) == (False, True, False)


def test_problems_are_warnings_failures_and_unknown_words() -> None:
    diagnosis = ascend_dmi_diag.parse(fixture("mixed_default_run.txt"))
    assert [item.name for item in diagnosis.problems] == ["driver", "device", "hbm", "aiflops"]
    assert diagnosis.incomplete == ()


def test_prompt_is_skipped_and_a_cut_item_is_incomplete() -> None:
    diagnosis = ascend_dmi_diag.parse(fixture("prompt_then_cut.txt"))
    assert diagnosis.summary is not None
    assert diagnosis.summary.time == datetime(2026, 1, 14, 3, 10, 12)
    assert diagnosis.items == (
        DiagItem(section="Hardware", name="aicore", status="PASS", verdict="pass"),
        DiagItem(section="Hardware", name="edp", status=None, verdict="incomplete"),
    )
    assert [item.name for item in diagnosis.incomplete] == ["edp"]
    assert [item.name for item in diagnosis.problems] == ["edp"]


def test_declined_prompt_is_an_error() -> None:
    with pytest.raises(ParseError, match="declined"):
        ascend_dmi_diag.parse(fixture("declined.txt"))


def test_summary_with_an_unparsable_time_keeps_the_text() -> None:
    diagnosis = ascend_dmi_diag.parse("Summary:\n    Arch: aarch64\n    Time: yesterday\n    Host: node-7\n"
                                      "Hardware:\n    driver:\n        HEALTH\n")
    assert diagnosis.summary is not None
    assert (diagnosis.summary.time, diagnosis.summary.time_text) == (None, "yesterday")
    assert diagnosis.summary.extra == {"Host": "node-7"}


@pytest.mark.parametrize(("text", "message"), [
    ("", "no Summary"),
    ("Segmentation fault\n", "before the first"),
    ("[root@host]# ascend-dmi --dg\nSummary:\n    Arch: aarch64\n", "before the first"),
    ("Hardware:\n        HEALTH\n", "before any item"),
    ("Hardware:\n  driver:\n        HEALTH\n", "4 spaces"),
    ("Summary:\n    Arch aarch64\n", "Key: value"),
    ("Summary:\n    Arch: a\nSummary:\n    Arch: b\n", "second Summary"),
])
def test_garbage_is_a_parse_error(text: str, message: str) -> None:
    with pytest.raises(ParseError, match=message):
        ascend_dmi_diag.parse(text)


_NAMES = st.sampled_from([*sorted(ascend_dmi_diag.KNOWN_ITEMS), "fooCheck"])
_STATUSES = st.sampled_from([*sorted(STATUS_VERDICTS), "WEIRD_STATE"])
_DETAILS = st.lists(st.from_regex(r"[A-Za-z0-9][A-Za-z0-9 .:]{0,30}[A-Za-z0-9.]", fullmatch=True), max_size=2)


@settings(max_examples=150, deadline=None, derandomize=True)
@given(st.lists(st.tuples(st.sampled_from(["Hardware", "Software"]), _NAMES, _STATUSES, _DETAILS),
                min_size=1, max_size=12))
def test_rendered_items_parse_back(rows: list[tuple[str, str, str, list[str]]]) -> None:
    lines = ["Summary:", "    Arch: aarch64", "    Mode: ******", "    Time: 20250529-19:19:35", " "]
    last_section = None
    for section, name, status, details in rows:
        if section != last_section:
            lines.append(f"{section}:")
            last_section = section
        lines += [f"    {name}:", f"        {status}", *(f"        *** {detail}" for detail in details)]
    diagnosis = ascend_dmi_diag.parse("\n".join(lines) + "\n")
    assert [(i.section, i.name, i.status, i.details) for i in diagnosis.items] == [
        (section, name, status, tuple(details)) for section, name, status, details in rows]
    assert all(i.verdict == STATUS_VERDICTS.get(i.status or "", "unknown") for i in diagnosis.items)
