"""vmagent's ``hashmod`` relabelling, to place a target on a shard of the VictoriaMetrics layout before it is
scraped: XXH64 (seed 0) of the source labels' value, modulo. Prometheus' own ``hashmod`` (MD5) differs; the
end-to-end tests draw agent ports until both put the culprit's node where they need it."""

from __future__ import annotations

_MASK = (1 << 64) - 1
_P1, _P2, _P3 = 0x9E3779B185EBCA87, 0xC2B2AE3D27D4EB4F, 0x165667B19E3779F9
_P4, _P5 = 0x85EBCA77C2B2AE63, 0x27D4EB2F165667C5


def _rotl(value: int, bits: int) -> int:
    return ((value << bits) | (value >> (64 - bits))) & _MASK


def _round(acc: int, lane: int) -> int:
    return _rotl((acc + lane * _P2) & _MASK, 31) * _P1 & _MASK


def xxh64(data: bytes) -> int:
    """XXH64 of ``data`` with seed 0."""
    size, at = len(data), 0
    if size >= 32:
        lanes = [(_P1 + _P2) & _MASK, _P2, 0, (-_P1) & _MASK]
        while at + 32 <= size:
            lanes = [_round(lane, int.from_bytes(data[at + 8 * i:at + 8 * i + 8], "little"))
                     for i, lane in enumerate(lanes)]
            at += 32
        value = (_rotl(lanes[0], 1) + _rotl(lanes[1], 7) + _rotl(lanes[2], 12) + _rotl(lanes[3], 18)) & _MASK
        for lane in lanes:
            value = ((value ^ _round(0, lane)) * _P1 + _P4) & _MASK
    else:
        value = _P5
    value = (value + size) & _MASK
    while at + 8 <= size:
        value ^= _round(0, int.from_bytes(data[at:at + 8], "little"))
        value = (_rotl(value, 27) * _P1 + _P4) & _MASK
        at += 8
    if at + 4 <= size:
        value ^= int.from_bytes(data[at:at + 4], "little") * _P1 & _MASK
        value = (_rotl(value, 23) * _P2 + _P3) & _MASK
        at += 4
    for byte in data[at:]:
        value ^= byte * _P5 & _MASK
        value = _rotl(value, 11) * _P1 & _MASK
    value ^= value >> 33
    value = value * _P2 & _MASK
    value ^= value >> 29
    value = value * _P3 & _MASK
    return value ^ (value >> 32)


def vmagent_shard(address: str, shards: int) -> int:
    """The shard vmagent's ``hashmod`` over ``__address__`` gives ``address``."""
    return xxh64(address.encode()) % shards
