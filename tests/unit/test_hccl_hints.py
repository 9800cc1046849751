"""The one reading of a culprit hint (``collectors.hccl.hints``): which peer it names, how its line blames it,
and the window that ties it to a failure, as the agent's incident window and offline triage both use them."""

from __future__ import annotations

import pytest

from agent.demo.plog import plog_timestamp
from agent.triage.logs import LogReader
from collectors.hccl.classify import StreamClassifier
from collectors.hccl.facts import CollectiveFailure
from collectors.hccl.hints import ATTACH_WINDOW_S, BLAME_HOWS, Hint, Peer, blame_how, decode_peer
from collectors.hccl.incident_window import IncidentWindow, peer_of

T0 = 1_740_902_400.0  # 2025-03-02 08:00 UTC
GROUP = "29.1.0.10%enp_60000_0_17"


@pytest.mark.parametrize(("kind", "value", "peer"), [
    ("remote_rank", "3", Peer(3, None)),
    ("remote_rank", "x", None),
    ("missing_rank", "17", Peer(17, None)),
    ("dst_rank", "9", Peer(9, None)),
    ("dst_rank", "192.168.200.100/0", Peer(None, "192.168.200.100", 0)),  # server IP / device ID: no rank
    ("exception_location", "29.3.1.11/5", Peer(5, "29.3.1.11")),  # [IP/ID] is ip/rank
    ("exception_location", "node-7/5", Peer(5, None)),  # a host name places nothing, the rank still counts
    ("server_device", "10.0.0.9/4", Peer(None, "10.0.0.9", 4)),  # serverId[..], deviceId[..]: a device, no rank
    ("server_device", "10.*.*.*/0", None),  # a masked server names nobody
    ("crimer_rank", "127.10.0.2/2", Peer(2, "127.10.0.2")),
    ("link_peer", "10.0.0.2/12", Peer(12, "10.0.0.2")),
    ("peer", "29.1.9.19", Peer(None, "29.1.9.19")),
    ("peer", "10.0.0.2/3", Peer(None, "10.0.0.2", 3)),
    ("root_server", "127.10.0.1:60000", Peer(None, "127.10.0.1")),
    ("root_server", "[fe80::1]:60000", Peer(None, "fe80::1")),
    ("root_server", "fe80::1", Peer(None, "fe80::1")),  # IPv6 without brackets has no port to cut
    ("exception_location", "29.3.1.11/5/x", Peer(None, "29.3.1.11")),  # the address is before the first slash
    ("peer", "10.0.0.2/3/x", Peer(None, "10.0.0.2")),
    ("peer", "not-an-ip", None),
    ("device", "3", None),
    ("remote_device", "6", None),
])
def test_decode_peer_reads_each_hint_kind(kind: str, value: str, peer: Peer | None) -> None:
    assert decode_peer(kind, value) == peer
    labels = None if peer is None else ("" if peer.rank is None else str(peer.rank), peer.address or "")
    assert peer_of(Hint(kind, value)) == labels


@pytest.mark.parametrize(("kind", "line", "how"), [
    ("crimer_rank", "local rank [127.10.0.1/1]: crimer rank [127.10.0.2/2] status[LOST] by informer", "lost"),
    ("crimer_rank", "crimer rank [127.10.0.2/2] status[STUCK]", "stuck"),
    ("exception_location", "Cluster Exception Location[IP/ID]:[1.2.3.4/1], ExceptionType:[Heartbeat Lost Occurred]",
     "lost"),
    ("exception_location", "Cluster Exception Location[IP/ID]:[1.2.3.4/1], ExceptionType:[Stuck Occurred]", "stuck"),
    ("exception_location", "Cluster Exception Location[IP/ID]:[1.2.3.4/1], ExceptionType:[Error CQE Occurred]",
     "cqe"),
    ("exception_location", "Cluster Exception Location[IP/ID]:[1.2.3.4/1]", "waited_on"),
    ("server_device", "serverId[10.0.0.9], deviceId[4], Heartbeat Lost Occurred", "lost"),
    ("remote_rank", "remote rank:[0]", "waited_on"),
    ("dst_rank", "fails to connect to dstRank (server 1.2.3.4, device ID 0)", "unreachable"),
    ("link_peer", "| 1.2.3.4(3) |", "unreachable"),
    ("root_server", "connect server[1.2.3.4 : 60000] failed", "unreachable"),
    ("peer", "[ROCE CQE ERROR]cqe error status[12], remoteIP{server[1.2.3.4]", "cqe"),
    ("peer", "[ROCE CQE ERROR] status[12], remoteIP{server[1.2.3.4]", "cqe"),  # upper case only
    ("peer", "[Heartbeat]cqe err status[12], remote server[1.2.3.4]", "cqe"),  # lower case only
    ("exception_location", "Cluster Exception Location[IP/ID]:[1.2.3.4/1], ExceptionType:[HEARTBEAT LOST]", "lost"),
    ("peer", "Peer information: server 1.2.3.4, device ID 1", "unreachable"),
    ("missing_rank", "Failed to connect agent[1,3,]", "missing"),
    ("device", "Heartbeat lost! (device=3", None),
])
def test_how_a_line_blames_its_peer(kind: str, line: str, how: str | None) -> None:
    assert blame_how(kind, line) == how
    assert how is None or how in BLAME_HOWS


def _plog(at: float, text: str, pid: int = 100) -> str:
    return f"[ERROR] HCCL({pid},python3):{plog_timestamp(at)} [hint.cc:1][{pid}]{text}"


# One line per hint kind that blames a peer, as HCCL prints it.
HINT_LINES = [
    "crimer rank [127.10.0.2/2] status[LOST] by informer rank [127.10.0.3/3]",
    "Cluster Exception Location[IP/ID]:[29.3.1.11/5], ExceptionType:[Heartbeat Lost Occurred]",
    "serverId[10.0.0.9], deviceId[4], Heartbeat Lost Occurred",
    "Task run failed, para information is remote rank:[6]",
    "fails to connect to dstRank (server 192.168.200.100, device ID 0)",
    "LINK_ERROR_INFO | 10.0.0.1(0) | 10.0.0.2(12) |",
    "cqe error status[12], remoteIP{server[29.1.9.19],deviceId[1],deviceIp[29.1.9.20]}",
    "Peer information: server 10.0.0.8, device ID 3",
    "TopoExchangeAgent: connect server[127.10.0.1 : 60000] failed",
]


def _decoded(line: str) -> set[tuple[str, Peer]]:
    _, hints = StreamClassifier().feed_lines([line])
    found = {(how, peer) for hint in hints
             if (peer := decode_peer(hint.kind, hint.value)) is not None
             and (how := blame_how(hint.kind, line)) is not None}
    assert found, f"no peer in {line!r}"
    return found


@pytest.mark.parametrize("text", HINT_LINES)
def test_triage_blames_the_peer_the_decoder_reads(text: str) -> None:
    line = _plog(T0, text)
    reader = LogReader("node-a", "plog-100.log")
    reader.feed(1, line)
    blames = {(b.how, Peer(b.rank, b.ip, b.device)) for b in reader.finish().blames}
    assert _decoded(line) <= blames


@pytest.mark.parametrize("text", HINT_LINES)
def test_the_incident_window_blames_the_peer_the_decoder_reads(text: str) -> None:
    line = _plog(T0, text)
    _, hints = StreamClassifier().feed_lines([line])
    window = IncidentWindow()
    window.feed("plog-100.log", [CollectiveFailure(GROUP, "AllReduce", 0, T0, pid=100)],
                [(hint, line) for hint in hints], read_at=T0)
    blamed = {(how, rank, address) for (_, how, rank, address) in window.blamed}
    expected = {(how, "" if peer.rank is None else str(peer.rank), peer.address or "")
                for how, peer in _decoded(line)}
    assert expected <= blamed


def test_a_hint_within_the_attach_window_of_a_failure_joins_it_online_and_offline() -> None:
    """A heartbeat line 10 minutes before the task timed out names the culprit of that failure in both."""
    early = T0 - 600.0
    hint_line = _plog(early, "crimer rank [127.10.0.2/2] status[LOST] by informer rank [127.10.0.3/3]")
    failure_lines = [
        _plog(T0, "Task run failed, base information is streamID:[2], taskID[21], tag[AllReduce_g1], "
                  "AlgType(level 0-1-2):[fullmesh-ring-NHR]."),
        _plog(T0, "Task run failed, groupRank information is group:[g1], user define information[], "
                  "rankSize[4], rankId[0]."),
    ]
    # the process runs ranks of two communicators: only the failure's time says which one the hint is about
    other = (f"[INFO] HCCL(100,python3):{plog_timestamp(early - 60)} [init.cc:1][100]Entry-HcclCommInitRootInfoInner:"
             "ranks[4], rank[1], rootinfo: host ip[127.10.0.1] port[60000] nicDeploy[1] identifier[g2], "
             "deviceLogicId[1]")
    reader = LogReader("node-a", "plog-100.log")
    for number, line in enumerate([other, hint_line, *failure_lines], start=1):
        reader.feed(number, line)
    blames = [b for b in reader.finish().blames if b.rank == 2]
    assert [(b.comm, b.reporter_rank) for b in blames] == [("g1", 0)]

    _, hints = StreamClassifier().feed_lines([hint_line])
    window = IncidentWindow()
    window.feed("plog-100.log", [CollectiveFailure("g1", "AllReduce", 0, T0, pid=100)],
                [(hint, hint_line) for hint in hints], read_at=T0)
    assert ("g1", "lost", "2", "127.10.0.2") in window.blamed


def test_a_hint_beyond_the_attach_window_joins_no_failure_online() -> None:
    late = T0 + ATTACH_WINDOW_S + 60.0
    hint_line = _plog(late, "crimer rank [127.10.0.2/2] status[LOST] by informer rank [127.10.0.3/3]")
    _, hints = StreamClassifier().feed_lines([hint_line])
    window = IncidentWindow(window_s=7200.0)
    window.feed("plog-100.log", [CollectiveFailure("g1", "AllReduce", 0, T0, pid=100)],
                [(hint, hint_line) for hint in hints], read_at=late)
    assert window.blamed == {}
