"""What the agent does with each HCCL / CANN log category: the first thing to do, the runbook, and, for the failures
that stop a rank while its peers time out, the local fault triage records on that rank and its weight.

One record per category of ``collectors.hccl.codes.CATEGORIES``, in its order (tests/unit/test_log_categories.py
holds the two lists, the alerts and the triage weights together). ``CODE_FAULTS`` does the same for the few
codes that are a local fault inside a broader category (a port the rank could not listen on is an ``init``
failure, and the rank's peers then time out connecting to it).
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["CODE_FAULTS", "LOG_CATEGORIES", "LOG_FAULTS", "LogCategory", "LogFault", "category_hint",
           "category_runbook", "fault_of"]

RUNBOOK_DIR = "alerts/runbooks/"


@dataclass(frozen=True)
class LogFault:
    """A local fault of the rank that logged it: a kind of ``agent.triage.faults.FAULT_KINDS``."""

    kind: str
    cause: str  # one of agent.triage.faults.CAUSES
    weight: float
    label: str


@dataclass(frozen=True)
class LogCategory:
    name: str
    hint: str  # what to do first
    runbook: str  # a file under alerts/runbooks/
    fault: LogFault | None = None


_OOM = LogFault("device_oom", "process_exit", 3.4, "device out of memory")
_AICORE = LogFault("aicore_fault", "process_exit", 3.4, "AI Core / vector core exception or timeout")
_OPERATOR = LogFault("operator_fault", "process_exit", 3.0, "operator or kernel package error")
_SDMA = LogFault("sdma_fault", "chip_fault", 3.2, "SDMA copy fault")
_DRIVER = LogFault("device_dropped", "chip_fault", 3.6, "device or driver dropped out")
_LISTEN = LogFault("port_listen_failed", "process_exit", 3.0, "could not listen on its HCCL port")

_TIMEOUT = RUNBOOK_DIR + "HCCLTimeout.md"
_CQE = RUNBOOK_DIR + "HCCLRoCECQEError.md"

LOG_CATEGORIES: tuple[LogCategory, ...] = (
    LogCategory("exec_timeout", "HCCL_EXEC_TIMEOUT expired: a rank stopped taking part; start with the rank named",
                _TIMEOUT),
    LogCategory("connect_timeout", "links were never set up: check the peer's RoCE port, IP and firewall", _TIMEOUT),
    LogCategory("rendezvous_timeout", "not every rank reached the rendezvous: look for a rank that crashed or was "
                "late", _TIMEOUT),
    LogCategory("roce_cqe", "RoCE completion errors: check link, optics and PFC on this and the peer's port", _CQE),
    LogCategory("sdma", "an SDMA copy failed on this device: check `npu-smi info` and dmesg for the chip, then "
                "the memory the copy used", _TIMEOUT, _SDMA),
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
    LogCategory("device_oom", "the device ran out of memory: lower the batch or sequence length, or set "
                "PYTORCH_NPU_ALLOC_CONF; the peers' HCCL timeouts follow from it", _TIMEOUT, _OOM),
    LogCategory("aicore", "an AI Core task failed: find the operator in the plog's error block and check its "
                "inputs; a repeat on one chip only points at the chip", _TIMEOUT, _AICORE),
    LogCategory("operator", "an operator or its kernel package failed: check that the CANN toolkit, kernels "
                "and torch_npu versions match", _TIMEOUT, _OPERATOR),
    LogCategory("device_lost", "the device or its driver dropped out: check `npu-smi info`, dmesg and the "
                "driver; the chip may need a reset", _TIMEOUT, _DRIVER),
    LogCategory("tcp_store", "c10d's TCPStore failed: check that the master (MASTER_ADDR:MASTER_PORT) is alive "
                "and reachable; a rank that died first makes the others fail here", _TIMEOUT),
    LogCategory("other", "read the first error: `npuwatch scan-logs` on the log directory", _TIMEOUT),
)

_BY_NAME = {category.name: category for category in LOG_CATEGORIES}

# Codes (synthetic or Ascend) whose event is a local fault of the rank whatever its category says.
CODE_FAULTS: dict[str, LogFault] = {
    "port_listen_failed": _LISTEN,
    "host_socket_listen_failed": _LISTEN,
    "socket_bind_failed": _LISTEN,
    "EI0019": _LISTEN,
    "EI0020": _LISTEN,
    "EJ0003": _LISTEN,
}

# Every local fault kind the logs give, once each (agent.triage.faults.FAULT_KINDS lists them).
LOG_FAULTS: tuple[LogFault, ...] = tuple(dict.fromkeys(
    [c.fault for c in LOG_CATEGORIES if c.fault is not None] + list(CODE_FAULTS.values())))


def _category(name: str) -> LogCategory:
    return _BY_NAME.get(name, _BY_NAME["other"])


def category_hint(name: str) -> str:
    """What to do first about log errors of category ``name`` (``other``'s for an unknown name)."""
    return _category(name).hint


def category_runbook(name: str) -> str:
    """The runbook file (from the repository root) for log errors of category ``name``."""
    return _category(name).runbook


def fault_of(category: str, code: str) -> LogFault | None:
    """The local fault an event of ``category`` under ``code`` is on the rank that logged it, if any."""
    return CODE_FAULTS.get(code) or (_BY_NAME[category].fault if category in _BY_NAME else None)
