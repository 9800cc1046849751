"""The HCCL faults of ascend-faultdiag's knowledge graph, each mapped to one of our categories.

Derived from ``kg-config.json`` of Huawei's Apache-2.0 ascend-faultdiag (collectors/hccl/NOTICE): each
``AISW_CANN_HCCL_*`` entity names a fault and the substrings that identify its log line
(``regex.in``: every substring of one alternative must be on the line). The phrasings are facts
about what HCCL prints; the category, the code we count it under and the one-line meaning are ours.
``rules.analyse_line`` tries these after its own rules, so a line our rules already know keeps
their code; tests/conformance holds this table to the reference file, and a unit test builds a
plog line from every alternative and asserts the category.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["KNOWLEDGE", "KnowledgeEntry", "match_knowledge"]


@dataclass(frozen=True)
class KnowledgeEntry:
    entity: str  # the knowledge graph's id, AISW_CANN_HCCL_001
    category: str  # ours (collectors.hccl.codes.CATEGORIES)
    code: str  # the code label a line of it counts under, when no rule of ours matched first
    means: str
    phrasings: tuple[tuple[str, ...], ...]  # alternatives; each: substrings that must all be on the line

    def matches(self, text: str) -> bool:
        return any(all(part in text for part in phrasing) for phrasing in self.phrasings)


def _entry(number: str, category: str, code: str, means: str, *phrasings: tuple[str, ...]) -> KnowledgeEntry:
    return KnowledgeEntry(f"AISW_CANN_HCCL_{number}", category, code, means, phrasings)


KNOWLEDGE: tuple[KnowledgeEntry, ...] = (
    _entry("001", "init", "if_ip_not_in_nic_list", "HCCL_IF_IP names an address no NIC of the host has",
           ("[Find][LocalHostIP]ip [", "] of [", "] is not found in the nic list")),
    _entry("002", "init", "socket_ifname_no_ip", "HCCL_SOCKET_IFNAME names an interface without an address",
           ("[Get][LocalServerId]get host ip fail by socket Ifname", "name", "ip")),
    _entry("003", "init", "host_socket_listen_failed", "the host could not listen on its socket",
           ("ra socket listen start fail", "return")),
    _entry("004", "rendezvous_timeout", "topo_exchange_timeout", "the root rank's rendezvous socket timed out",
           ("[Get][Connection]topo exchange server get socket timeout",)),
    _entry("005", "rendezvous_timeout", "topo_exchange_timeout", "a rank timed out reaching the root's rendezvous",
           ("[Get][Connection]topo exchange agent get socket timeout",)),
    _entry("006", "rendezvous_timeout", "topo_detect_failed", "a rank lost the root's cluster information",
           ("[Recv][ClusterInfoMsg]receive msg length from fdhandle failed",),
           ("[Recv][ClusterInfoMsg]receive from fdhandle failed",)),
    _entry("007", "init", "ranktable_path_error", "the rank table file does not exist",
           ("[HcomLoadRanktableFile]get file[", "] real path error")),
    _entry("008", "desync", "datatype_check_failed", "a collective was called with a data type HCCL refuses",
           ("DataType check fail",)),
    _entry("009", "init", "ranktable_json_error", "the rank table is not valid JSON",
           ("[Read][File]errNo[", "] load file[", "] to json fail. please check json file")),
    _entry("010", "init", "ranktable_parse_error", "the rank table's content is wrong",
           ("[Parse][ClusterInfo]",)),
    _entry("011", "init", "tsd_open_failed", "the device's TSD client could not be opened",
           ("[Open][Tsd]Open TsdClient failed",)),
    _entry("012", "init", "env_var_param_error", "an HCCL environment variable has a bad value",
           ("[Init][EnvVarParam]",)),
    _entry("013", "init", "socket_bind_failed", "a socket could not bind or listen (the port is taken)",
           ("bind fail", "family", "IP", "port", "sock", "ret", "error",
            "Possible Cause: the IP address and port have been bound already"),
           ("socket type", "listen on ip", "and specific port", "fail",
            "Please check the port status and whether the port"),
           ("bind and listen fail", "err_no", "listen_fd", "listen state", "server_port"),
           ("ra listen start failed ret",),
           ("bind fail", "port", "sock", "ret", "error"),
           ("rs_connect_bind_client_failed", "ret")),
    _entry("014", "init", "rdma_init_failed", "the RDMA NIC could not be initialised",
           ("rdma init fail",)),
    _entry("015", "desync", "invalid_argument", "a collective was called with an invalid argument",
           ("In", "value", "for parameter", "is invalid", "Reason",
            "The collective communication operator has an invalid argument", "Reason")),
    _entry("016", "connect_timeout", "p2p_connect_timeout", "the P2P link between two devices timed out",
           ("[Wait][P2PConnected]connected p2p timeout",)),
    _entry("017", "connect_timeout", "link_establish_failed", "a link to a peer device could not be set up",
           ("the connection failure between this device and", "target device"),
           ("Wait links establish completed failed",)),
    _entry("018", "connect_timeout", "socket_recv_failed", "a peer's socket stopped answering",
           ("[Recv][RaSocket]",)),
    _entry("019", "init", "notify_create_failed", "a notify register could not be created",
           ("Notify create failed",)),
    _entry("020", "desync", "rank_consistency_failed", "ranks called the collective with different information",
           ("[RankConsistentImpl][CompareFrame]",)),
    _entry("021", "init", "ipc_memory_set_failed", "IPC memory could not be named for peers",
           ("rtSet Ipc Memory Name", "return")),
    _entry("022", "init", "ipc_memory_open_failed", "a peer's IPC memory could not be opened",
           ("rtOpen ipc memory fail", "return")),
    _entry("023", "init", "qp_create_failed", "an RDMA queue pair could not be created",
           ("ra qp create fail",)),
    _entry("024", "connect_timeout", "qp_connect_timeout", "an RDMA queue pair to a peer timed out connecting",
           ("[Connect][Qp]get qp status timeout_=", "qp_status=")),
    _entry("025", "dispatch", "task_dispatch_failed", "the runtime could not deliver a collective's task",
           ("rt rdma send fail",), ("rt memory async copy failed",), ("rt reduce async fail",)),
    _entry("026", "dispatch", "rdma_wqe_send_failed", "an RDMA work request could not be posted",
           ("[Send][RaWr]",), ("[Send][RaWrlist]",)),
    _entry("027", "exec_timeout", "notify_wait", "a notify wait task timed out on the device",
           ("[TaskExceptionHandler][Callback]Task run failed, base information is streamID", "taskID",
            "taskType[Notify Wait]"),
           ("[TaskExceptionHandler][Callback]FFTS+ run failed, op information is streamID", "taskID",
            "taskType[Notify Wait]")),
    _entry("028", "connect_timeout", "qp_connect_timeout", "an RDMA queue pair to a peer timed out connecting",
           ("Connect][Qp]get qp status timeout_=", "qp_status=")),
    _entry("029", "roce_cqe", "cqe_error", "RDMA retransmissions ran out: a RoCE completion error",
           ("[Heartbeat]cqe err status",), ("[Heartbeat]cqe error status",), ("cqe error status[12]",)),
    _entry("031", "sdma", "sdma_task_failed", "an SDMA copy or inline-reduce task failed",
           ("taskType[Memcpy]",), ("taskType[Reduce Inline]",)),
    _entry("033", "dispatch", "ffts_dispatch_failed", "an FFTS+ task could not be delivered",
           ("ffts context type is invalid",)),
    _entry("034", "desync", "tls_inconsistent", "ranks disagree on whether TLS is on",
           ("Some ranks tlsStatus are inconsistent",)),
)


def match_knowledge(text: str) -> KnowledgeEntry | None:
    """The first entry whose phrasing is on the line, or None."""
    for entry in KNOWLEDGE:
        if entry.matches(text):
            return entry
    return None
