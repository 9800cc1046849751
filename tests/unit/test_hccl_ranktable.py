"""HCCL rank-table parser on synthetic fixtures (tests/fixtures/hccl_ranktable/)."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from collectors.base import ParseError
from collectors.hccl import ranktable as hccl_ranktable
from collectors.hccl.ranktable import RankEntry
from collectors.hccn_ip import parse_hccn_conf
from tests.support import paths

FIXTURES = paths.FIXTURES / "hccl_ranktable"


def fixture(name: str) -> str:
    return (FIXTURES / name).read_text()


def test_v1_0_two_servers() -> None:
    table = hccl_ranktable.parse(fixture("v1.0_two_servers.json"))
    assert (table.version, table.status, table.completed, table.server_count) == ("1.0", "completed", True, 2)
    assert [entry.rank for entry in table.entries] == list(range(16))
    assert table.servers == ("node-a", "node-b")
    assert table.by_rank(9) == RankEntry(rank=9, server_id="node-b", device_id=1, device_ip="29.1.1.7",
                                         host_ip="10.20.0.12")
    assert table.locate_rank(9) == ("node-b", 1)
    assert table.locate_device_ip("29.0.6.7") == ("node-a", 6, 6)
    assert table.locate_rank(16) is None
    assert table.locate_device_ip("29.9.9.9") is None
    assert [entry.rank for entry in table.on_server("node-b")] == list(range(8, 16))


def test_v1_2_super_pods_and_integer_ids() -> None:
    table = hccl_ranktable.parse(fixture("v1.2_two_super_pods.json").encode())
    assert (table.version, table.server_count) == ("1.2", None)
    assert [(e.rank, e.server_id, e.device_id, e.device_ip, e.super_device_id, e.super_pod_id, e.container_ip)
            for e in table.entries] == [
        (0, "192.168.9.1", 0, "10.1.2.1", 113246208, "0", "172.16.0.5"),
        (1, "192.168.9.1", 1, "10.1.3.1", 113311745, "0", "172.16.0.5"),
        (2, "192.168.9.2", 0, "10.1.2.2", 114294792, "1", "172.16.0.6"),
        (3, "192.168.9.2", 1, "10.1.3.2", 114360329, "1", "172.16.0.6"),
    ]
    assert all(entry.host_ip is None for entry in table.entries)


def test_v2_0_950_rank_list() -> None:
    # the 950's layout: ranks, each with its network layers and UB endpoint ids; no device IP, no server list
    table = hccl_ranktable.parse(fixture("v2.0_950_two_servers.json"))
    assert (table.version, table.status, table.server_count) == ("2.0", "completed", None)
    assert [entry.rank for entry in table.entries] == list(range(8))
    assert table.servers == ("node-a", "node-b")
    entry = table.by_rank(6)
    assert entry is not None
    assert (entry.server_id, entry.device_id, entry.local_id, entry.device_ip) == ("node-b", 2, 2, None)
    assert entry.eids == ("00000000000000000000000000010200", "00000000000000000000000000010201")
    assert (entry.planes, entry.net_instances) == (("plane0", "plane1"), ("node-b", "pod0"))
    assert table.locate_rank(6) == ("node-b", 2)


def test_v2_0_layers_in_any_order_and_local_id_for_a_missing_device_id() -> None:
    table = hccl_ranktable.parse(json.dumps({"version": "2.0", "rank_list": [{
        "rank_id": "3", "local_id": 1, "level_list": [
            {"net_layer": 2, "net_instance_id": "cluster"}, {"net_layer": 0, "net_instance_id": 7}]}]}))
    [entry] = table.entries
    assert (entry.rank, entry.server_id, entry.device_id, entry.net_instances) == (3, "7", 1, ("7", "cluster"))


def test_initializing_table_without_devices_is_accepted() -> None:
    table = hccl_ranktable.parse('{"status": "initializing", "version": "1.0", "server_list": []}')
    assert (table.completed, table.entries) == (False, ())


def test_hccn_conf_cross_check_reuses_the_hccn_conf_parser() -> None:
    table = hccl_ranktable.parse(fixture("v1.0_two_servers.json"))
    conf = parse_hccn_conf(fixture("hccn_node_a.conf"))
    assert hccl_ranktable.hccn_conf_mismatches(table, "node-a", conf) == [
        "device 3 (rank 3): rank table device_ip 29.0.3.7 but hccn.conf address_3=29.0.3.99",
        "device 5 (rank 5): no address_5 in hccn.conf",
    ]
    assert hccl_ranktable.hccn_conf_mismatches(table, "node-c", conf) == []


def _v1(devices: list[dict[str, object]], **top: object) -> str:
    return json.dumps({"version": "1.0", "status": "completed", **top,
                       "server_list": [{"server_id": "s0", "device": devices}]})


@pytest.mark.parametrize(("text", "message"), [
    ("{not json", "not valid JSON"),
    ('// comment\n{"version": "1.0"}', "not valid JSON"),
    ("[1, 2]", "not a JSON object"),
    ('{"server_list": []}', "missing 'version'"),
    ('{"version": "1.0"}', "missing 'server_list'"),
    ('{"version": "1.0", "server_list": [{"device": []}]}', r"server_list\[0\]: missing 'server_id'"),
    ('{"version": "1.0", "server_list": [{"server_id": "s0"}]}', r"server_list\[0\]: missing 'device'"),
    ('{"version": "1.0", "server_list": {"server_id": "s0"}}', "expected a list of objects"),
    (_v1([{"device_id": "0", "device_ip": "1.1.1.1"}]), r"device\[0\]: missing 'rank_id'"),
    (_v1([{"rank_id": "0", "device_ip": "1.1.1.1"}]), r"device\[0\]: missing 'device_id'"),
    (_v1([{"device_id": "0", "rank_id": "zero"}]), r"device\[0\].rank_id: 'zero' is not a non-negative integer"),
    (_v1([{"device_id": "-1", "rank_id": "0"}]), r"device\[0\].device_id: '-1'"),
    (_v1([{"device_id": True, "rank_id": "0"}]), r"device_id: True"),
    (_v1([{"device_id": "0", "rank_id": "0", "device_ip": "192.1.27.x"}]), "not an IP address"),
    (_v1([{"device_id": "0", "rank_id": "0", "super_device_id": "abc"}]), "super_device_id"),
    (_v1([{"device_id": "0", "rank_id": "3"}, {"device_id": "1", "rank_id": "3"}]), "rank_id 3 appears twice"),
    (_v1([{"device_id": "2", "rank_id": "0"}, {"device_id": "2", "rank_id": "1"}]),
     "server s0 device 2 has ranks 0 and 1"),
    (_v1([{"device_id": "0", "rank_id": "0", "device_ip": "1.1.1.1"},
          {"device_id": "1", "rank_id": "1", "device_ip": "1.1.1.1"}]), "device_ip 1.1.1.1 is used by ranks 0 and 1"),
    (_v1([], server_count="two"), "lists no device"),
    (_v1([{"device_id": "0", "rank_id": "0"}], server_count="two"), "server_count: 'two'"),
    (_v1([{"device_id": "0", "rank_id": "0"}], super_pod_list=[
        {"super_pod_id": "0", "server_list": [{"server_id": "s0"}]},
        {"super_pod_id": "1", "server_list": [{"server_id": "s0"}]}]), "server s0 is in super pods 0 and 1"),
    ('{"version": "2.0", "rank_count": 2, "rank_list": []}', "rank_count is 2 but rank_list holds 0 ranks"),
    ('{"version": "2.0", "status": "completed", "rank_list": []}', "lists no rank"),
    ('{"version": "2.0", "rank_list": [{"rank_id": 0, "device_id": 0}]}', r"rank_list\[0\]: missing 'level_list'"),
    ('{"version": "2.0", "rank_list": [{"rank_id": 0, "level_list": [{"net_layer": 0, "net_instance_id": "s"}]}]}',
     r"rank_list\[0\]: missing 'device_id'"),
    ('{"version": "2.0", "rank_list": [{"rank_id": 0, "device_id": 0, "level_list": [{"net_layer": 0}]}]}',
     r"level_list\[0\]: missing 'net_instance_id'"),
    ('{"version": "2.0", "rank_list": [{"rank_id": 0, "device_id": 0, "level_list": []}]}', "no network layer"),
    (json.dumps({"version": "2.0", "rank_list": [
        {"rank_id": rank, "device_id": rank, "level_list": [{"net_layer": 0, "net_instance_id": "s", "rank_addr_list": [
            {"addr_type": "EID", "addr": "e1", "plane_id": "0"}]}]} for rank in (0, 1)]}),
     "EID e1 is used by ranks 0 and 1"),
    ('{"group_count": "1", "group_list": []}', "group_list"),
])
def test_invalid_tables_are_refused_with_a_clear_message(text: str, message: str) -> None:
    with pytest.raises(ParseError, match=message):
        hccl_ranktable.parse(text)


def test_size_cap_refuses_before_parsing(tmp_path: Path) -> None:
    assert hccl_ranktable.MAX_RANK_TABLE_BYTES == 64 * 1024 * 1024
    with pytest.raises(ParseError, match="over the 1024-byte limit"):
        hccl_ranktable.parse(b" " * 1025, max_bytes=1024)
    path = tmp_path / "hccl.json"
    path.write_text(fixture("v1.2_two_super_pods.json") + " " * 4096)
    with pytest.raises(ParseError, match="larger than the 2048-byte limit"):
        hccl_ranktable.load(path, max_bytes=2048)
    assert len(hccl_ranktable.load(path, max_bytes=8192).entries) == 4


def test_deeply_nested_json_is_a_parse_error() -> None:
    with pytest.raises(ParseError, match="not valid JSON"):
        hccl_ranktable.parse('{"version": "1.0", "x": ' + "[" * 100_000 + "]" * 100_000 + "}")


@settings(max_examples=100, deadline=None, derandomize=True)
@given(st.lists(st.integers(min_value=1, max_value=16), min_size=1, max_size=6), st.randoms(use_true_random=False))
def test_generated_tables_round_trip(devices_per_server: list[int], rng: random.Random) -> None:
    ranks = list(range(sum(devices_per_server)))
    rng.shuffle(ranks)
    servers, expected, next_rank = [], {}, iter(ranks)
    for s, count in enumerate(devices_per_server):
        devices = []
        for d in range(count):
            rank = next(next_rank)
            devices.append({"device_id": str(d), "device_ip": f"10.{s}.{d}.1", "rank_id": str(rank)})
            expected[rank] = (f"host-{s}", d)
        servers.append({"server_id": f"host-{s}", "device": devices})
    table = hccl_ranktable.parse(json.dumps({"version": "1.0", "status": "completed", "server_list": servers}))
    assert [entry.rank for entry in table.entries] == sorted(ranks)
    assert {rank: table.locate_rank(rank) for rank in ranks} == expected
    assert all(table.locate_device_ip(f"10.{s}.{d}.1") == (f"host-{s}", d, rank)
               for rank, (host, d) in expected.items() for s in [int(host.split("-")[1])])
