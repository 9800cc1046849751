"""Culprit hints: what a log line says about a peer, how it blames it, and which rank and address it names.

The one reading of a hint's value (``decode_peer``) and the one window that ties a hint to a failure
(``ATTACH_WINDOW_S``) serve both the agent's incident window and offline triage.
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass
from typing import Any

from collectors.hccl.rendezvous import CONNECT_SERVER_RE, MISSING_TRIGGERS, parse_rendezvous

__all__ = ["ATTACH_WINDOW_S", "BLAME_HOWS", "Hint", "Peer", "blame_how", "decode_peer", "line_hints"]

# A hint belongs to a failure printed at most this far from it, before or after. The heartbeat lines
# that name a lost or stuck peer come a minute or more before the task times out (each rank waits its
# own exec timeout), so 5 minutes (the agent's old window) dropped peers that triage (15 minutes) kept.
ATTACH_WINDOW_S = 900.0
# How a line blames a peer (the ``how`` label of npu_hccl_peer_blamed_timestamp_seconds, triage's Blame.how):
#   lost        heartbeat lost / crimer status[LOST]: the process exited or its network is gone
#   stuck       heartbeat says the peer is stuck (host process or device task)
#   waited_on   a timed-out task waited for this rank (``remote rank``, notify wait)
#   unreachable a link or connection to this peer failed (LINK_ERROR_INFO, connect timeouts)
#   cqe         RoCE completion (retransmission) errors towards this peer
#   missing     the rank never joined the rendezvous (EI0015 topo exchange)
BLAME_HOWS = ("lost", "stuck", "waited_on", "unreachable", "cqe", "missing")


@dataclass(frozen=True)
class Hint:
    """A culprit hint: which peer, rank or device the log blames."""

    kind: str
    value: str
    timestamp: float | None = None
    source: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "value": self.value, "timestamp": self.timestamp, "source": self.source}


@dataclass(frozen=True)
class Peer:
    """The peer a hint names: its rank in the communicator, its address, the device id printed with it."""

    rank: int | None
    address: str | None
    device: int | None = None


# ---------------------------------------------------------------- reading hints off a line

_IPV4 = r"\d{1,3}(?:\.\d{1,3}){3}"
_SKIP_VALUES = frozenset({"", "unknown", "local", "4294967295", "-1", "null", "none", "NA"})
_HINT_RULES: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"[Rr]emote ?[Rr]ank(?:\s*:\s*\[?|\s*\[)\s*([^\]\s,;)]+)"), "remote_rank"),
    (re.compile(r"remoteUserrank\[(\d+)\]"), "remote_rank"),
    (re.compile(r"crimer rank \[([^\]]+)\]"), "crimer_rank"),
    (re.compile(r"Cluster Exception Location\[IP/ID\]:\[([^\]]*)\]"), "exception_location"),
    (re.compile(rf"dstRank \(server ({_IPV4}), device ID (\d+)\)"), "dst_rank"),
    (re.compile(r"(?:dstRank|dst_rank)\s*[\[:=]\s*(\d+)"), "dst_rank"),
    (re.compile(rf"\|\s+({_IPV4})\((\d+)\)\s+\|"), "link_peer"),
    (re.compile(rf"Peer information: server ({_IPV4}), device ID (\d+)"), "peer"),
    (re.compile(rf"Peer information: server {_IPV4}, device ID \d+, device IP ({_IPV4})"), "peer"),
    (re.compile(r"remoteIP\{server\[([^\]]+)\]"), "peer"),
    (re.compile(r"remoteIP\{server\[[^\]]*\],deviceId\[[^\]]*\],deviceIp\[([^\]]+)\]"), "peer"),
    (re.compile(r"(?:remoteIpAddr|remote_ip_addr)\[([^\]]+)\]"), "peer"),
    (re.compile(r"serverId\[([^\]]+)\], deviceId\[(\d+)\]"), "server_device"),
    (re.compile(r"Heartbeat lost! \(device=(\d+)"), "device"),
    (CONNECT_SERVER_RE, "root_server"),
    (re.compile(r"remote device\[(\d+)\]"), "remote_device"),
)
_HINT_TRIGGERS = ("emote", "crimer", "Cluster Exception", "dstRank", "dst_rank", "|", "Peer information",
                  "serverId[", "(device=", "connect server[")
_HINT_JOINERS = {"root_server": ":"}


def line_hints(text: str) -> tuple[tuple[str, str], ...]:
    found: list[tuple[str, str]] = []
    if any(trigger in text for trigger in _HINT_TRIGGERS):
        for pattern, kind in _HINT_RULES:
            for match in pattern.finditer(text):
                value = _HINT_JOINERS.get(kind, "/").join(match.groups())
                if value.strip() not in _SKIP_VALUES and (kind, value) not in found:
                    found.append((kind, value))
                if kind == "link_peer":
                    break  # a LINK_ERROR_INFO row names the destination first
    if any(trigger in text for trigger in MISSING_TRIGGERS):
        for rank in parse_rendezvous(text).missing or ():
            entry = ("missing_rank", str(rank))
            if entry not in found:
                found.append(entry)
    return tuple(found)


# ---------------------------------------------------------------- what a hint means

# Hint kinds whose value is a rank; "address/rank" pairs; "address/device" pairs or a bare address.
_RANK_KINDS = frozenset({"remote_rank", "missing_rank"})
_PAIR_KINDS = frozenset({"crimer_rank", "exception_location", "link_peer"})
_ADDRESS_KINDS = frozenset({"peer", "dst_rank", "server_device", "root_server"})


def _address(text: str) -> str | None:
    text = text.strip().strip("[]")
    try:
        return str(ipaddress.ip_address(text))
    except ValueError:
        return None  # a host name or a masked address (10.*.*.*) places nothing


def _number(text: str) -> int | None:
    text = text.strip()
    return int(text) if text.isdigit() else None


def decode_peer(kind: str, value: str, how: str | None = None) -> Peer | None:
    """The peer a hint of ``kind`` names; None when it names no rank and no address.

    ``crimer_rank``, ``exception_location`` and ``link_peer`` print ``address/rank``; ``peer``,
    ``dst_rank`` and ``server_device`` print ``address/device`` (server IP and device id) or an
    address, ``root_server`` ``address:port``; a bare number of any of these is a rank. A ``Stuck
    Occurred`` location (``how`` ``stuck``) lists the abnormal devices: its number is a device id.
    """
    if kind == "exception_location" and how == "stuck":
        kind = "server_device"
    if kind in _RANK_KINDS:
        rank, address, device = _number(value), None, None
    elif kind == "root_server":
        host = value.rsplit(":", 1)[0] if value.count(":") == 1 or "]" in value else value
        rank, address, device = None, _address(host), None
    elif "/" in value and kind in _PAIR_KINDS:
        left, _, right = value.partition("/")
        rank, address, device = _number(right), _address(left), None
    elif "/" in value and kind in _ADDRESS_KINDS:
        left, _, right = value.partition("/")
        rank, address, device = None, _address(left), _number(right)
    elif kind in _PAIR_KINDS or kind in _ADDRESS_KINDS:
        rank, address, device = _number(value), _address(value), None
    else:
        return None  # "device" / "remote_device" name a local device, not a peer
    if rank is None and address is None:
        return None
    return Peer(rank, address, device)


def blame_how(kind: str, line: str) -> str | None:
    """How the line a hint of ``kind`` came from blames its peer (``BLAME_HOWS``); None: it does not."""
    if kind == "crimer_rank":
        return "lost" if "LOST" in line else "stuck"
    if kind in ("exception_location", "server_device"):
        if "Lost" in line or "LOST" in line:
            return "lost"
        if "CQE" in line:
            return "cqe"
        return "stuck" if "Stuck" in line else "waited_on"
    if kind == "remote_rank":
        return "waited_on"
    if kind in ("dst_rank", "link_peer", "root_server"):
        return "unreachable"
    if kind == "peer":
        return "cqe" if "CQE" in line or "cqe" in line else "unreachable"
    if kind == "missing_rank":
        return "missing"
    return None
