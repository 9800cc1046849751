"""One line's verdict: the (code, category) matches and culprit hints an HCCL / CANN log line carries.

Pure and stateless; ``classify.StreamClassifier`` joins lines into incidents. The rules follow the
phrasings HCCL prints (docs/hccl-log-formats.md), then those of ascend-faultdiag's knowledge graph
(collectors.hccl.knowledge). An ``[ERROR]`` plog line of module HCCL, HCCP or ROCE (or another
module's that names HCCL) that neither knows is a provisional ``other`` under the code
``<module>:<source file>``, so unknown failures are never silent.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from collectors.hccl.codes import TRIAGE_FAILURE_CATEGORIES, is_ascend_code
from collectors.hccl.hints import line_hints
from collectors.hccl.knowledge import match_knowledge
from collectors.hccl.lines import QUIET_LEVELS, parse_timestamp, split_prefixes
from collectors.hccl.table_rules import CODE_SHAPE_RE, CODE_TOKENS, code_matches, wording_match

__all__ = ["MAX_TEXT", "LineResult", "analyse_line", "classify_line"]

MAX_TEXT = 300


@dataclass(frozen=True)
class LineResult:
    """What one line says: its own timestamp, (code, category) matches and (kind, value) hints.

    ``provisional`` is True when the only match is the ``other`` code of an ``[ERROR]`` line no
    rule knows, or a phrasing HCCL prints in several stages (``Wait timeout for sockets recv``):
    such a match counts only when no recognised incident is near it. ``indented``: the line (after
    any job prefix) starts with white space.
    """

    timestamp: float | None
    matches: tuple[tuple[str, str], ...]
    hints: tuple[tuple[str, str], ...]
    text: str
    provisional: bool = False
    indented: bool = False


# ---------------------------------------------------------------- pre-filter

# Every rule below needs one of these tokens, or a code family's (table_rules.CODE_SHAPE_RE, CODE_TOKENS),
# somewhere in the line.
_TOKENS = ("rror", "RROR", "imeout", "IMEOUT", "ime out", "imes out", "imed out", "EI", "EJ", "EE", "EH", "EL", "EZ",
           "5070", "50789", "207001", "eartbeat", "otify", "OTIFY", "cqe", "CQE", "tuck", "ail", "nconsistent",
           "crimer", "dstRank", "emoteRank", "Cluster Exception", "out of memory", "xception")


_INTERESTING_RE = re.compile("|".join(re.escape(token) for token in _TOKENS))


def _interesting(line: str) -> bool:
    return (_INTERESTING_RE.search(line) is not None or CODE_SHAPE_RE.search(line) is not None
            or any(token in line for token in CODE_TOKENS))


# ---------------------------------------------------------------- rules

# A local copy fault whose message prints a CQE status (SMMU Terminate): not a RoCE completion error.
_LOCAL_COPY_RE = re.compile(r"(?i)sdma|system dma|smmu")

# (compiled pattern, synthetic code, category); the first match per category wins.
_SYNTHETIC_RULES: tuple[tuple[re.Pattern[str], str, str], ...] = tuple(
    (re.compile(pattern), code, category)
    for pattern, code, category in (
        # exec_timeout
        (r"fftsplus task timeout|reason=\[fftsplus timeout\]", "fftsplus_timeout", "exec_timeout"),
        (r"stuck notify", "stuck_notify", "exec_timeout"),
        (r"\[TaskExecStage\]\[Timeout\]", "task_exec_timeout", "exec_timeout"),
        (r"Notify Wait|NOTIFY WAIT|[Nn]otify wait (?:execute failed|time ?out)"
         r"|wait execution of the Notify register times out", "notify_wait", "exec_timeout"),
        (r"(?i)dispatch\w*\s+time ?out", "dispatch_timeout", "exec_timeout"),
        # rendezvous_timeout (before the generic socket timeouts)
        (r"topo\w*\s*exchange\w*.*?time ?out", "topo_exchange_timeout", "rendezvous_timeout"),
        (r"Failed to connect agent\[|rank num\[\d+\]\s*is different with rank list size"
         r"|TopoExchangeAgent: connect server\[|connectFailedAgentIdList|\[Recv\]\[ClusterInfoMsg\]"
         r"|\[DetectClusterTopoInfo\]|setup topo detect error", "topo_detect_failed", "rendezvous_timeout"),
        # connect_timeout
        (r"socket establish timeout|[Gg]et(?:ting)? socket time(?:s)? ?out|socket time ?out", "socket_timeout",
         "connect_timeout"),
        (r"(?i)p2p (?:connect\w* )?time ?out|connected p2p timeout", "p2p_connect_timeout",
         "connect_timeout"),
        (r"LINK_ERROR_INFO", "link_error", "connect_timeout"),
        # "Transport init error." (a period) is the traceback of EI0005 / EI0009, not a timeout
        (r"Transport init error!|\[InitChannelStage\]\[Timeout\]", "transport_init_timeout",
         "connect_timeout"),
        (r"CONNECT TIMEOUT DETECT RESULT|fails to connect to dstRank", "connect_detect", "connect_timeout"),
        # roce_cqe: driver, HCCP and HCCL phrasings of a RoCE completion (retransmission) error
        (r"(?i)error[ _]cqe|cqe[ _]error|cqe status|err_cqe|\bwc[ _]status\b"
         r"|completion (?:queue )?(?:entry )?error|retr\w* (?:count )?exceeded", "cqe_error", "roce_cqe"),
        # sdma
        (r"(?i)sdma error|SDMA memory copy task exception|System DMA hardware execution error"
         r"|sdma task has an error|sdma copy error", "sdma_error",
         "sdma"),
        # watchdog_timeout
        (r"Watchdog caught collective operation timeout", "watchdog", "watchdog_timeout"),
        # stream_sync_timeout (texts of EE1002 / 507046 / 507048 printed without the code)
        (r"Stream synchronize timeout|stream sync timeout"
         r"|all tasks in the specified stream are not completed", "stream_sync_timeout",
         "stream_sync_timeout"),
        (r"execution of the internal task times out", "internal_task_timeout", "stream_sync_timeout"),
        # heartbeat
        (r"Heartbeat lost!", "device_heartbeat_lost", "heartbeat"),
        (r"Heartbeat Lost Occurred|crimer rank.*status\[LOST\]", "heartbeat_lost", "heartbeat"),
        (r"Stuck Occurred", "rank_stuck", "heartbeat"),
        # init
        (r"listen on ip\[.*\bfail|(?i:port\[\d+\]\s*(?:listen|bind)\w* fail)", "port_listen_failed", "init"),
        (r"Failed to initialize the HCCP process", "hccp_init_failed", "init"),
        (r"rdma init fail", "rdma_init_failed", "init"),
        (r"\[init\]\[ra_\w*\].*fail", "ra_init_failed", "init"),
        (r"\[check\]\[ip\]fail|in the ranktable is inconsistent with the IP", "ranktable_ip_mismatch", "init"),
        (r"error in init_hcclComm", "comm_init_failed", "init"),
        (r"\[InitGroupStage\]\[EnvConfig\]|Environment variable \[\w+\] is invalid", "env_config_error", "init"),
        (r"\[InitGroupStage\]\[(?:RanktableConfig|RanktableCheck)\]", "ranktable_check_failed", "init"),
        (r"\[InitGroupStage\]\[Resource\]", "init_resource_error", "init"),
        (r"Transport init error.*Create Dest error", "transport_create_failed", "init"),  # EI0009's text
        # the non-HCCL failures that stop a rank while its peers time out
        (r"NPU out of memory|Memory_Allocation_Failure|(?i:failed to allocate (?:device )?memory)",
         "npu_oom", "device_oom"),
        (r"(?i)aicore execution times? out|ai ?core (?:execution )?(?:exception|timeout)"
         r"|(?:aicore|aivec|aic|aiv|aicpu) error exception|aicpu (?:task )?exception|vector core exception",
         "aicore_exception", "aicore"),
        (r"Parse dynamic kernel config fail|AclNN_Inner_Error|(?i:aclnn\w* inner error)", "operator_error",
         "operator"),
        (r"Device\[\d+\] lost heartbeat|task scheduler loses? the heartbeat"
         r"|drvGetDevNum\w*.*(?:fail|error|ret(?:urn)?\s*[=:\[]\s*[1-9])"
         r"|(?i:device not found)", "device_lost", "device_lost"),
        (r"store->get\(.*got error|TCPStore\w*.*(?:fail|error|timed out|reset)"
         r"|The client socket has (?:timed out|failed to connect)", "tcp_store_error", "tcp_store"),
        # watchdog_exception
        (r"[Ww]atchdog thread terminated with exception", "watchdog_exception", "watchdog_exception"),
        # desync
        # "the TLS configurations are inconsistent" is a possible cause in other codes' advice, not a reading
        (r"tlsStatus are inconsistent|(?i:tls ?(?:switch|status|enable)\w*\b.*inconsistent)", "tls_inconsistent",
         "desync"),
        (r"\[InitChannelStage\]\[ParameterConflict\]|CMD information \w+ check fail"
         r"|arguments for collective communication are inconsistent", "parameter_conflict", "desync"),
        (r"\[InitChannelStage\]\[VersionConflict\]", "version_conflict", "desync"),
    )
)

# Phrasings HCCL prints in more than one stage: provisional, like a fallback, so that the stage's own
# line near it decides ("Wait timeout for sockets recv" is a rendezvous timeout when the topo
# exchange lines follow it, a link setup timeout otherwise).
_WEAK_RULES: tuple[tuple[re.Pattern[str], str, str], ...] = (
    (re.compile(r"Wait timeout for sockets"), "socket_timeout", "connect_timeout"),
    # The wrappers of a failed communicator init: the specific error printed with them leads.
    (re.compile(r"ERR02200 DIST call hccl api failed"), "dist_hccl_api_failed", "init"),
    (re.compile(r"HCCL function error: [Hh]cclCommInit\w*|\[Init\]\[CommRootInfoConfig\]"
                r"|HcclCommInit\w* fail(?:ed)?\b|HCCL get root info failed|HcclGetRootInfo\w* failed"),
     "hccl_comm_init_failed", "init"),
)

# An [ERROR] plog header: module, then the source file the line was printed from (if any).
_ERROR_HEADER_RE = re.compile(r"\[ERROR\]\s?([A-Z][A-Z0-9_]*)\(\d+,[^)]*\):")
_SOURCE_FILE_RE = re.compile(r"\[(?:[^\[\]:]*/)?([A-Za-z0-9_.-]+?)\.(?:cc|cpp|cxx|c|h|hpp|py)\s*:\s*\d+\]")
_HCCL_MODULES = frozenset({"HCCL", "HCCP", "ROCE"})
# Other modules' [ERROR] lines count only when they name HCCL: RUNTIME/ASCENDCL print errors of
# every kind of task, and a TDT queue error is not a collective failure.
_HCCL_MARKERS = ("hccl", "Hccl", "HCCL", "hcom", "Hcom", "HCOM")


def _is_advice(text: str) -> bool:
    return text.startswith(("Possible Cause", "Solution", "(Please search"))


def _fallback_code(text: str) -> str | None:
    """``module:file`` of an [ERROR] plog line that belongs to HCCL, else None."""
    header = _ERROR_HEADER_RE.search(text)  # search: grep output puts "path:" before the header
    if header is None:
        return None
    module = header.group(1)
    if module not in _HCCL_MODULES and not any(marker in text for marker in _HCCL_MARKERS):
        return None
    source = _SOURCE_FILE_RE.search(text, header.end())
    if source is None:
        return module.lower()
    return f"{module.lower()}:{source.group(1).lower()[:48]}"


def analyse_line(line: str, ref_time: float | None) -> LineResult | None:
    """None when the pre-filter rejects the line; else its timestamp, matches and hints."""
    if line.startswith(QUIET_LEVELS) and "crimer" not in line:
        return None
    if not _interesting(line):
        return None
    text, indented = split_prefixes(line)
    if (text.startswith(QUIET_LEVELS) and "crimer" not in text) or _is_advice(text):
        return None
    # every code family of the packaged table; envelopes (EZ9999, 507011) and warnings apart
    matches, envelopes = code_matches(text)
    seen_categories = {category for _, category in matches}
    for pattern, code, category in _SYNTHETIC_RULES:
        if category not in seen_categories and pattern.search(text):
            if category == "roce_cqe" and _LOCAL_COPY_RE.search(text):
                continue
            matches.append((code, category))
            seen_categories.add(category)
    if not matches:
        worded = wording_match(text)  # the runtime's wordings by release, through the packaged table
        if worded is not None and worded[2]:
            envelopes.insert(0, worded[:2])
        elif worded is not None:
            matches.append(worded[:2])
            seen_categories.add(worded[1])
    if "watchdog_exception" in seen_categories and any(
            c in TRIAGE_FAILURE_CATEGORIES for _, c in matches if c != "watchdog_exception"):
        # the watchdog died on a failure the line already reports (its own timeout, EI0002)
        matches = [m for m in matches if m[1] != "watchdog_exception"]
    if any(code == "transport_create_failed" for code, _ in matches):
        matches = [m for m in matches if m[0] != "transport_init_timeout"]
    if "rendezvous_timeout" in seen_categories:
        # "topo exchange ... get socket timeout" is the rendezvous, not a link setup timeout.
        matches = [m for m in matches if m[1] != "connect_timeout" or is_ascend_code(m[0])]
    # EI0009's text without its code is also the traceback of other codes (EI0005): it leads only alone
    provisional = bool(matches) and all(code == "transport_create_failed" for code, _ in matches)
    if not matches:
        for pattern, code, category in _WEAK_RULES:
            if pattern.search(text):
                matches.append((code, category))
                provisional = True
                break
    if not matches and envelopes:
        # EZ9999 alone says only "an error inside": it counts when no specific reading is near.
        matches.append(envelopes[0])
        provisional = True
    if not matches:
        known = match_knowledge(text)  # the knowledge graph's phrasings: after ours, before the fallback
        if known is not None:
            matches.append((known.code, known.category))
        else:
            fallback = _fallback_code(text)
            if fallback is not None:
                matches.append((fallback, "other"))
                provisional = True
    return LineResult(parse_timestamp(text, ref_time), tuple(matches), line_hints(text), text[:MAX_TEXT],
                      provisional, indented)


def classify_line(line: str, ref_time: float | None = None) -> LineResult | None:
    """Classify one line; None when it says nothing about an error (the common, fast case).

    ``ref_time`` (the file's mtime) supplies the year for glog and syslog timestamps.
    """
    result = analyse_line(line, ref_time)
    if result is None or (not result.matches and not result.hints):
        return None
    return result
