"""Prometheus remote write 1.0 by hand, for the benchmarks that write a synthetic fleet: protobuf encoded here,
snappy framing with literals only (no compression), so no client library is needed."""

from __future__ import annotations

import struct
import time
import urllib.error
import urllib.request
from collections.abc import Sequence

from tests.support.prom_harness import HarnessError


def _varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _field(number: int, payload: bytes) -> bytes:
    return _varint(number << 3 | 2) + _varint(len(payload)) + payload


def labels_blob(labels: Sequence[tuple[str, str]]) -> bytes:
    """The ``labels`` fields of a prometheus.TimeSeries (sorted by name, as the protocol requires)."""
    return b"".join(_field(1, _field(1, name.encode()) + _field(2, value.encode())) for name, value in sorted(labels))


def _sample(value: float, ms: int) -> bytes:
    return _field(2, b"\x09" + struct.pack("<d", value) + b"\x10" + _varint(ms))


def _snappy_literal(data: bytes) -> bytes:
    """A valid snappy block that stores ``data`` as literals (no compression: snappy's framing only)."""
    out = bytearray(_varint(len(data)))
    for start in range(0, len(data), 1 << 16):
        chunk = data[start:start + (1 << 16)]
        n = len(chunk) - 1
        if n < 60:
            out.append(n << 2)
        elif n < 1 << 8:
            out += bytes([60 << 2, n])
        else:
            out += bytes([61 << 2]) + n.to_bytes(2, "little")
        out += chunk
    return bytes(out)


def remote_write(url: str, series: Sequence[tuple[bytes, float]], ms: int | None, batch: int = 20_000) -> None:
    """POST every series with one sample at ``ms`` (Prometheus remote write 1.0); None: each batch stamped when
    it is sent, as a scrape's samples are fresh when they arrive."""
    for start in range(0, len(series), batch):
        stamp = int(time.time() * 1000) if ms is None else ms
        body = b"".join(_field(1, labels + _sample(value, stamp)) for labels, value in series[start:start + batch])
        post_write_request(url, body, timeout=120)


def post_write_request(url: str, body: bytes, timeout: float) -> None:
    """POST one remote write 1.0 request (``body``: its series fields), snappy-framed uncompressed."""
    request = urllib.request.Request(url, data=_snappy_literal(body), method="POST", headers={
        "Content-Type": "application/x-protobuf", "Content-Encoding": "snappy",
        "X-Prometheus-Remote-Write-Version": "0.1.0"})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            response.read()
    except urllib.error.HTTPError as exc:
        raise HarnessError(f"{url}: HTTP {exc.code}: {exc.read()[:300]!r}") from None
