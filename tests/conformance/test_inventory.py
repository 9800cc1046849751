"""Every file in the shared corpus is claimed by one conformance module, or listed as pending with why.

The corpus grows; a new capture that no test looks at would silently prove nothing. Each claim is a
file-name prefix and the test module that asserts that file's values. Skips when the corpus is absent.
"""

from __future__ import annotations

import pytest

from collectors import hccn_ip
from collectors.base import ParseError
from tests.support.paths import CORPUS, TESTS

if not (CORPUS / "tools").is_dir():
    pytest.skip(f"corpus not found at {CORPUS}", allow_module_level=True)


# tools/ file-name prefix -> the module that asserts its values
CLAIMS: dict[str, str] = {
    "npu-smi_info__": "conformance/test_npu_smi_tables.py",
    "npu-smi_info_-m__": "conformance/test_npu_smi_tables.py",
    "npu-smi_info_-l__": "conformance/test_npu_smi_tables.py",
    "npu-smi_info_-t_": "conformance/test_npu_smi_kv.py",
    "hccn_tool_": "conformance/test_hccn_dmi.py",
    "ascend-dmi_": "conformance/test_hccn_dmi.py",
    "hccl-": "conformance/test_hccl_logs.py",
    "hccl-ranktable_": "conformance/test_ranktable.py",
    "cat_etc-hccn.conf": "conformance/test_inventory.py",
    "flight-recorder_dump": "conformance/test_flight_recorder.py",
}
# Captures no parser reads, and why.
PENDING: dict[str, str] = {
    "npu-smi_info_watch__": "the agent never runs the endless `npu-smi info watch`; `npu-smi info` and "
                            "`-t usages` give the same readings",
    "torchfrtrace_": "analyzer output: triage reads the flight-recorder dumps themselves (agent.triage.flight)",
    "fr_trace__": "analyzer output: triage reads the flight-recorder dumps themselves (agent.triage.flight)",
    "fr-analysis_": "analyzer output: triage reads the flight-recorder dumps themselves (agent.triage.flight)",
}


def _claim(name: str) -> str | None:
    matches = [prefix for prefix in (*CLAIMS, *PENDING) if name.startswith(prefix)]
    return max(matches, key=len) if matches else None


def test_every_tools_file_is_claimed_or_pending() -> None:
    names = [p.name for p in (CORPUS / "tools").iterdir() if p.is_file() and p.name != "INDEX.md"]
    assert len(names) >= 90
    assert [name for name in names if _claim(name) is None] == []


def test_every_claiming_module_exists() -> None:
    for module in set(CLAIMS.values()):
        assert (TESTS / module).is_file(), module


def test_every_pending_prefix_still_names_a_file() -> None:
    names = [p.name for p in (CORPUS / "tools").iterdir()]
    for prefix in PENDING:
        assert any(name.startswith(prefix) for name in names), prefix


def test_hccn_conf_with_an_elided_middle() -> None:
    (path,) = (CORPUS / "tools").glob("cat_etc-hccn.conf__*")
    # The blogger replaced devices 1-6 with a literal '...' line (INDEX.md: ignore it); a real file has none,
    # and the parser rightly refuses a line without '='.
    text = path.read_text()
    with pytest.raises(ParseError):
        hccn_ip.parse_hccn_conf(text)
    entries = hccn_ip.parse_hccn_conf("\n".join(line for line in text.splitlines() if line.strip() != "..."))
    assert sorted(entries) == [0, 7]
    assert (entries[0].address, entries[0].netmask) == ("29.1.137.205", "255.255.0.0")
    assert (entries[7].address, entries[7].netmask) == ("29.1.170.143", "255.255.0.0")
