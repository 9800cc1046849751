"""What the agent does with each HCCL / CANN log category: the first thing to do, the runbook, and, for the failures
that stop a rank while its peers time out, the local fault triage records on that rank and its weight.

One record per category of ``collectors.hccl.codes.CATEGORIES``, in its order (tests/unit/test_log_categories.py
holds the two lists, the alerts and the triage weights together). ``CODE_FAULTS`` does the same for the few
codes that are a local fault inside a broader category (a port the rank could not listen on is an ``init``
failure, and the rank's peers then time out connecting to it).
"""

from __future__ import annotations

from dataclasses import dataclass

from agent.health.thresholds import FaultKind, fault_kind

__all__ = ["CODE_FAULTS", "LOG_CATEGORIES", "LOG_FAULTS", "LogCategory", "category_hint", "category_runbook",
           "fault_of"]

RUNBOOK_DIR = "alerts/runbooks/"


@dataclass(frozen=True)
class LogCategory:
    name: str
    hint: str  # what to do first
    runbook: str  # a file under alerts/runbooks/
    fault: FaultKind | None = None  # the local fault of the rank that logged it (its kind's record)


_OOM = fault_kind("device_oom")
_AICORE = fault_kind("aicore_fault")
_OPERATOR = fault_kind("operator_fault")
_SDMA = fault_kind("sdma_fault")
_DRIVER = fault_kind("device_dropped")
_LISTEN = fault_kind("port_listen_failed")
_LINK = fault_kind("link_fault")
_HBM = fault_kind("hbm_ecc_fault")
_PROGRAM = fault_kind("program_error")
_CONFIG = fault_kind("config_error")

_TIMEOUT = RUNBOOK_DIR + "HCCLTimeout.md"
_CQE = RUNBOOK_DIR + "HCCLRoCECQEError.md"

LOG_CATEGORIES: tuple[LogCategory, ...] = (
    LogCategory("exec_timeout", "HCCL_EXEC_TIMEOUT expired: a rank stopped taking part; start with the rank named",
                _TIMEOUT),
    LogCategory("connect_timeout", "links were never set up: check the peer's RoCE port, IP and firewall", _TIMEOUT),
    LogCategory("rendezvous_timeout", "not every rank reached the rendezvous: look for a rank that crashed or was "
                "late", _TIMEOUT),
    LogCategory("roce_cqe", "RoCE completion errors: check link, optics and PFC on this and the peer's port", _CQE),
    LogCategory("sdma", _SDMA.hint, _TIMEOUT, _SDMA),
    LogCategory("dispatch", "a task could not be delivered to the device or the NIC: check the device's health "
                "and its RoCE port", _TIMEOUT),
    LogCategory("watchdog_timeout", "torch_npu's watchdog hit a collective timeout: find the rank that stopped "
                "first", _TIMEOUT),
    LogCategory("stream_sync_timeout", "a stream synchronize timed out: the host side of an exec timeout; find "
                "the rank that stopped first", _TIMEOUT),
    LogCategory("heartbeat", "a rank or device stopped its heartbeat: find the rank that died first", _TIMEOUT),
    LogCategory("init", "communicator init failed: check the rank table, HCCL_IF_IP / HCCL_SOCKET_IFNAME and "
                "that the HCCL ports are free", _TIMEOUT),
    LogCategory("desync", "ranks called different collectives or different parameters: compare the ranks' "
                "code paths at the operation named", _TIMEOUT),
    LogCategory("watchdog_exception", "torch_npu's watchdog stopped on the error it printed: read that code "
                "first", _TIMEOUT),
    LogCategory("device_oom", _OOM.hint, _TIMEOUT, _OOM),
    LogCategory("aicore", _AICORE.hint, _TIMEOUT, _AICORE),
    LogCategory("operator", _OPERATOR.hint, _TIMEOUT, _OPERATOR),
    LogCategory("device_lost", _DRIVER.hint, _TIMEOUT, _DRIVER),
    LogCategory("tcp_store", "c10d's TCPStore failed: check that the master (MASTER_ADDR:MASTER_PORT) is alive "
                "and reachable; a rank that died first makes the others fail here", _TIMEOUT),
    LogCategory("link", _LINK.hint, RUNBOOK_DIR + "NPURoCELinkDown.md", _LINK),
    LogCategory("hbm_ecc", _HBM.hint, RUNBOOK_DIR + "NPUHBMDoubleBitECC.md", _HBM),
    # the rank's own failure for triage; never a fault of the node (agent.health.checks_node passes it)
    LogCategory("program_error", "the program failed, the node is fine: " + _PROGRAM.hint, _TIMEOUT, _PROGRAM),
    LogCategory("config_error", "the program failed, the node is fine: " + _CONFIG.hint, _TIMEOUT, _CONFIG),
    LogCategory("other", "read the first error: `npuwatch scan-logs` on the log directory", _TIMEOUT),
)

_BY_NAME = {category.name: category for category in LOG_CATEGORIES}

# Codes (synthetic or Ascend) whose event is a local fault of the rank whatever its category says.
CODE_FAULTS: dict[str, FaultKind] = {
    "port_listen_failed": _LISTEN,
    "host_socket_listen_failed": _LISTEN,
    "socket_bind_failed": _LISTEN,
    "EI0019": _LISTEN,
    "EI0020": _LISTEN,
    "EJ0003": _LISTEN,
}

# Every local fault kind the logs give, once each (agent.health.thresholds.FAULT_KINDS holds their records).
LOG_FAULTS: tuple[FaultKind, ...] = tuple(dict.fromkeys(
    [c.fault for c in LOG_CATEGORIES if c.fault is not None] + list(CODE_FAULTS.values())))


def _category(name: str) -> LogCategory:
    return _BY_NAME.get(name, _BY_NAME["other"])


def category_hint(name: str) -> str:
    """What to do first about log errors of category ``name`` (``other``'s for an unknown name)."""
    return _category(name).hint


def category_runbook(name: str) -> str:
    """The runbook file (from the repository root) for log errors of category ``name``."""
    return _category(name).runbook


def fault_of(category: str, code: str) -> FaultKind | None:
    """The local fault an event of ``category`` under ``code`` is on the rank that logged it, if any."""
    return CODE_FAULTS.get(code) or (_BY_NAME[category].fault if category in _BY_NAME else None)
