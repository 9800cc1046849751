"""``agent.health.faults.roce_ip``: a RoCE port's live address against hccn.conf, and duplicates."""

from __future__ import annotations

from agent.health import faults
from agent.health.status import FAIL, PASS, UNKNOWN
from collectors.hccn_ip import HccnConfEntry, IpRecord

LIVE = IpRecord("29.1.3.13", "255.255.0.0")
CONF = "/etc/hccn.conf"


def test_an_address_that_matches_passes() -> None:
    result = faults.roce_ip(LIVE, HccnConfEntry(3, "29.1.3.13", "255.255.0.0"), 3, conf_path=CONF, npu=3, chip=0)
    assert (result.status, result.kind, result.evidence) == (PASS, None, "29.1.3.13")
    assert (result.value, result.threshold, result.basis, result.npu) == ("29.1.3.13", "29.1.3.13", CONF, 3)


def test_an_address_that_differs_fails_as_ip_mismatch() -> None:
    result = faults.roce_ip(LIVE, HccnConfEntry(3, "29.1.3.99"), 3, conf_path=CONF)
    assert (result.status, result.kind) == (FAIL, "ip_mismatch")
    assert result.evidence == "hccn_tool -i 3 -ip -g: device 3: ipaddr 29.1.3.13 but hccn.conf address 29.1.3.99"
    assert (result.value, result.threshold, result.basis) == ("29.1.3.13", "29.1.3.99", CONF)


def test_a_netmask_that_differs_fails() -> None:
    result = faults.roce_ip(LIVE, HccnConfEntry(3, "29.1.3.13", "255.255.255.0"), 3, conf_path=CONF)
    assert (result.status, result.kind) == (FAIL, "ip_mismatch") and "netmask" in result.evidence


def test_no_entry_or_no_address_is_unknown() -> None:
    for entry in (None, HccnConfEntry(3, None, "255.255.0.0")):
        result = faults.roce_ip(LIVE, entry, 3, conf_path=CONF)
        assert (result.status, result.kind) == (UNKNOWN, None)
        assert result.evidence == f"no address_3 in {CONF}" and result.threshold is None


def test_a_duplicate_fails_even_when_the_file_agrees() -> None:
    result = faults.roce_ip(LIVE, HccnConfEntry(3, "29.1.3.13"), 3, conf_path=CONF, duplicate_of="NPU 1")
    assert (result.status, result.kind) == (FAIL, "ip_mismatch")
    assert result.evidence == "hccn_tool -i 3 -ip -g: 29.1.3.13 is also the address of NPU 1"
    assert faults.roce_ip(LIVE, None, 3, conf_path=CONF, duplicate_of="NPU 1").status == FAIL
