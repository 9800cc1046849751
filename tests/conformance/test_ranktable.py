"""HCCL rank-table parser over the corpus's two rank tables (``tools/hccl-ranktable_*``).

test_conformance_hccl_logs.py separately asserts that the log scanner finds nothing in them.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from collectors.hccl import ranktable as hccl_ranktable
from tests.support.paths import CORPUS

TOOLS = CORPUS / "tools"
if not TOOLS.is_dir():
    pytest.skip(f"corpus not found at {CORPUS}", allow_module_level=True)


def table_file(fragment: str) -> Path:
    (path,) = TOOLS.glob(f"hccl-ranktable_{fragment}[-_]*")
    return path


def test_every_rank_table_in_the_corpus_parses() -> None:
    paths = sorted(TOOLS.glob("hccl-ranktable_*"))
    assert len(paths) == 2
    for path in paths:
        assert hccl_ranktable.load(path).completed


def test_v1_0_mindspore_eight_devices_one_server() -> None:
    table = hccl_ranktable.load(table_file("v1.0"))
    assert (table.version, table.status, table.server_count) == ("1.0", "completed", 1)
    assert table.servers == ("10.*.*.*",)  # sanitised in the doc; server_id is not checked as an IP
    assert [(e.rank, e.device_id, e.device_ip) for e in table.entries] == [
        (0, 0, "192.1.27.6"), (1, 1, "192.2.27.6"), (2, 2, "192.3.27.6"), (3, 3, "192.4.27.6"),
        (4, 4, "192.1.27.7"), (5, 5, "192.2.27.7"), (6, 6, "192.3.27.7"), (7, 7, "192.4.27.7"),
    ]
    assert all((e.super_device_id, e.super_pod_id, e.host_ip, e.container_ip) == (None, None, None, None)
               for e in table.entries)
    assert table.locate_device_ip("192.3.27.7") == ("10.*.*.*", 6, 6)


def test_v1_2_a3_sixteen_dies_one_super_pod() -> None:
    table = hccl_ranktable.load(table_file("v1.2"))
    assert (table.version, table.status, table.server_count) == ("1.2", "completed", 1)
    assert table.servers == ("10.0.0.1",)
    assert [e.rank for e in table.entries] == list(range(16))
    assert all(e.rank == e.device_id for e in table.entries)
    assert [e.device_ip for e in table.entries] == [f"10.0.{2 + d % 2}.{41 + d // 2}" for d in range(16)]
    assert [e.super_device_id for e in table.entries] == [
        113246208, 113311745, 113508354, 113573891, 113770500, 113836037, 114032646, 114098183,
        114294792, 114360329, 114556938, 114622475, 114819084, 114884621, 115081230, 115146767,
    ]
    assert {(e.super_pod_id, e.container_ip, e.host_ip) for e in table.entries} == {("1", "192.168.247.11", None)}
    assert table.locate_rank(15) == ("10.0.0.1", 15)
    assert table.locate_device_ip("10.0.3.48") == ("10.0.0.1", 15, 15)
