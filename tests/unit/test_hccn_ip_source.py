"""hccn_tool -ip -g as a source: each RoCE port's device IP as npu_roce_ip_info, on the demo too."""

from __future__ import annotations

import pytest

from collectors import hccn_ip
from collectors.base import ChipRef, CollectContext, ParseError, Sample
from collectors.sources import SOURCES


def test_the_source_is_registered_per_chip_on_the_roce_interval() -> None:
    source = next(s for s in SOURCES if s.name == "hccn_ip")
    assert (source.tool, source.group, source.scope, source.default_enabled) == ("hccn_tool", "roce", "chip", True)
    assert source.argv(ChipRef(3, 0, phy_id=3)) == ["-i", "3", "-ip", "-g"]


def test_the_address_becomes_an_info_series() -> None:
    source = next(s for s in SOURCES if s.name == "hccn_ip")
    records = source.parse("ipaddr:29.1.112.213\nnetmask:255.255.0.0\n")
    assert source.samples(records, ChipRef(1, 0), CollectContext()) == [
        Sample("npu_roce_ip_info", (("npu", "1"), ("chip", "0"), ("address", "29.1.112.213")), 1.0)]


def test_an_ipv6_address_is_exported_in_its_canonical_form() -> None:
    record = hccn_ip.IpRecord("FE80:0:0:0:0:0:0:1", None)
    assert hccn_ip.samples(record, ChipRef(0, 0), CollectContext())[0].labels[-1] == ("address", "fe80::1")


def test_output_without_an_address_is_a_parse_error() -> None:
    with pytest.raises(ParseError):
        hccn_ip.parse("netmask:255.255.0.0\n")
