"""Parsers for the 950 (UnifiedBus) ``hccn_tool -g -<cmd> -i <dev> [-u <udie> -p <port>]`` syntax.

Parser only; no ``Source`` uses these yet (the 950 exporter wiring needs a per-port
scope the agent does not have). ``-g -link -u -p`` prints the same ``link status:``
line as 910B and parses with ``hccn_link.parse``; ``-g -link_stat`` (box table,
``LINK_UP``/``LINK_DOWN``) parses with ``hccn_link_stat.parse``; ``-g -stat -u -p``
parses with ``hccn_stat.parse``. This module covers the rest, from vendor
documentation examples only **[doc]**:

``-g -ub_connect -i 0``::

    link status : PARTIAL LINK
    port 4 : UP
    port 6 : PARTIAL UP

``-g -dev_info -i 0`` (first box table: UB ports)::

    | UDie ID | Port ID | Speed Ability(Gbps) | Port Type | Link Status | Media Type |
    | 0       | 4       | 400                 | UB        | UP          | Electrical |

``-g -bandwidth -i 0 -u 0 -p 4 -time 3000``::

    Bandwidth TX:       0.00 MB/sec

Not handled: the interface and EID tables of ``-dev_info`` and ``-vnic``.

Ids outside 0..2^31-1, speeds beyond 3.2 Tb/s, bandwidths beyond 400 GB/s and
more than ``LIMITS["links"]`` ports (``collectors.bounds``) are ParseErrors naming
the line: these parsers feed diagnostics only, where a partial answer is worse
than a clear refusal.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from collectors.base import ParseError
from collectors.bounds import BOUNDS, LIMITS
from collectors.hccn_link import clean_lines, raise_unparsable

__all__ = ["UbBandwidth", "UbConnectRecord", "UbPort", "parse_bandwidth", "parse_dev_info_ports",
           "parse_ub_connect"]

_AGGREGATE_RE = re.compile(r"^link\s+status\s*:\s*(?P<state>.+?)\s*$", re.IGNORECASE)
_PORT_RE = re.compile(r"^port\s+(?P<port>\d+)\s*:\s*(?P<state>.+?)\s*$", re.IGNORECASE)
_BANDWIDTH_RE = re.compile(
    r"^bandwidth\s+(?P<dir>tx|rx)\s*:\s*(?P<num>\d+(?:\.\d+)?)\s*(?P<unit>[KMG]B)/s(?:ec)?$", re.IGNORECASE)
_BYTES = {"kb": 1e3, "mb": 1e6, "gb": 1e9}  # decimal units assumed: the docs do not say


@dataclass(frozen=True)
class UbConnectRecord:
    state: str  # "LINK", "PARTIAL LINK", ... as printed
    ports: dict[int, str]  # port -> "UP" / "DOWN" / "PARTIAL UP"

    @property
    def fully_linked(self) -> bool:
        return all(state.upper() == "UP" for state in self.ports.values()) and bool(self.ports)


@dataclass(frozen=True)
class UbPort:
    udie: int
    port: int
    speed_gbps: float | None
    port_type: str
    link_up: bool
    media: str


@dataclass(frozen=True)
class UbBandwidth:
    tx_bytes_per_second: float | None
    rx_bytes_per_second: float | None


def _checked_id(text: str, line_no: int, line: str) -> int:
    """An id printed as ASCII digits within ``BOUNDS["id"]``; a ParseError naming the line otherwise."""
    if not text.isascii() or not text.isdigit() or len(text) > 10 or not BOUNDS["id"].contains(int(text)):
        raise ParseError(f"id {text[:20]!r} is not an integer in range", line_no, line)
    return int(text)


def parse_ub_connect(text: str) -> UbConnectRecord:
    state: str | None = None
    ports: dict[int, str] = {}
    for line_no, line in clean_lines(text):
        if (port := _PORT_RE.match(line)) is not None:
            number = _checked_id(port.group("port"), line_no, line)
            if number not in ports and len(ports) >= LIMITS["links"]:
                raise ParseError(f"more than {LIMITS['links']} ports", line_no, line)
            ports[number] = port.group("state")
        elif (aggregate := _AGGREGATE_RE.match(line)) is not None:
            state = aggregate.group("state")
    if state is None:
        raise_unparsable(text, "a 'link status' line")
    return UbConnectRecord(state=state, ports=ports)


def parse_dev_info_ports(text: str) -> list[UbPort]:
    """The UB port table of ``-dev_info`` (the first table whose header has ``Port ID``)."""
    header: list[str] | None = None
    ports: list[UbPort] = []
    for line_no, line in clean_lines(text):
        if not line.startswith("|"):
            if line.startswith("+") and header is not None and ports:
                break  # end of the port table; later tables are not ports
            continue
        cells = [cell.strip() for cell in line.strip("|").split("|")]
        if header is None:
            if "Port ID" in cells:
                header = [cell.lower() for cell in cells]
            continue
        row = dict(zip(header, cells))
        if len(ports) >= LIMITS["links"]:
            raise ParseError(f"more than {LIMITS['links']} ports", line_no, line)
        try:
            speed_text = row.get("speed ability(gbps)", "")
            speed = float(speed_text) if speed_text.replace(".", "", 1).isdigit() else None
            if speed is not None and not BOUNDS["roce_speed_bits_per_second"].contains(speed * 1e9):
                raise ValueError(speed_text)
            ports.append(UbPort(
                udie=_checked_id(row["udie id"], line_no, line),
                port=_checked_id(row["port id"], line_no, line),
                speed_gbps=speed,
                port_type=row.get("port type", ""),
                link_up=row.get("link status", "").upper() == "UP",
                media=row.get("media type", ""),
            ))
        except (KeyError, ValueError):
            raise ParseError("bad UB port row", line_no, line) from None
    if header is None:
        raise_unparsable(text, "a UB port table")
    return ports


def parse_bandwidth(text: str) -> UbBandwidth:
    values: dict[str, float] = {}
    for line_no, line in clean_lines(text):
        match = _BANDWIDTH_RE.match(line)
        if match is not None:
            scale = _BYTES[match.group("unit").lower()]
            value = float(match.group("num")) * scale
            if not BOUNDS["port_bandwidth_bytes_per_second"].contains(value):
                raise ParseError("bandwidth beyond any UB port", line_no, line)
            values[match.group("dir").lower()] = value
    if not values:
        raise_unparsable(text, "'Bandwidth TX/RX' lines")
    return UbBandwidth(tx_bytes_per_second=values.get("tx"), rx_bytes_per_second=values.get("rx"))
