"""tests/support/vm_hashmod.py: XXH64 as vmagent's ``hashmod`` uses it (checked against vmagent itself in
tests/integration/test_vm_shards.py)."""

from __future__ import annotations

from tests.support.vm_hashmod import vmagent_shard, xxh64


def test_xxh64_of_the_reference_vectors() -> None:
    assert xxh64(b"") == 0xEF46DB3751D8E999  # the specification's empty input, seed 0
    assert xxh64(b"a" * 100) == xxh64(b"a" * 100) != xxh64(b"a" * 99)


def test_the_shards_vmagent_gave_these_addresses() -> None:
    # read from vmagent 1.79's /api/v1/targets with `hashmod` over __address__, modulus 2
    assert [vmagent_shard(f"127.0.0.1:{port}", 2) for port in range(1001, 1009)] == [0, 1, 0, 1, 0, 1, 0, 1]
