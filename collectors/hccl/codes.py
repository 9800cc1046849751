"""The HCCL code and category table: which Ascend code is which category, and what each category is for.

A category's columns say who acts on it: the alert a new incident of it pages (``HCCLTimeout``,
``HCCLRoCECQEError``: alerts/hccl.rules.yml takes its category matchers from here, a test fails on
drift), whether ``npuwatch triage`` takes it as a failure report that opens an incident, and whether
diagnose's and check's log check counts it as an HCCL timeout. A RoCE CQE error pages
``HCCLRoCECQEError`` and diagnose counts it, while triage scores it as a local fault of the NPU.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = [
    "ASCEND_CODE_CATEGORIES",
    "CATEGORIES",
    "DIAGNOSE_TIMEOUT_CATEGORIES",
    "ENVELOPE_CODES",
    "HCCL_TIMEOUT_CATEGORIES",
    "PROGRAM_CATEGORIES",
    "TRIAGE_FAILURE_CATEGORIES",
    "Category",
    "category_matcher",
    "category_of_code",
    "is_ascend_code",
    "paged_by",
]


@dataclass(frozen=True)
class Category:
    """One category of HCCL/CANN errors (the ``category`` label of ``npu_hccl_errors_total``)."""

    name: str
    means: str
    pages: str = ""  # the alert a new incident pages; "" for none
    triage: bool = False  # a failure report: it opens or joins an incident in ``npuwatch triage``
    diagnose: bool = False  # diagnose's and check's log check counts it as an HCCL timeout
    # What it says about the node: "node" a fault of the node or its links, "job" a failure of the job that
    # the node's health may explain, "program" / "config" the program or its configuration failed and the
    # node is fine, "unknown" an error nobody classified.
    nature: str = "job"


# In the order of the metric catalogue (``collectors.catalogue.HCCL_CATEGORIES`` is this column).
CATEGORIES: tuple[Category, ...] = (
    Category("exec_timeout", "a collective's task timed out on the device (EI0002, notify wait)",
             "HCCLTimeout", triage=True, diagnose=True),
    Category("connect_timeout", "a link to a peer could not be set up (EI0006, socket timeout)",
             "HCCLTimeout", triage=True, diagnose=True),
    Category("rendezvous_timeout", "communicator init: not every rank reached the rendezvous (EI0015)",
             "HCCLTimeout", triage=True, diagnose=True),
    Category("roce_cqe", "a RoCE completion (CQE) error: a local link fault for triage (EI0013)",
             "HCCLRoCECQEError", diagnose=True, nature="node"),
    Category("sdma", "an SDMA copy task failed (EI0012)", triage=True, diagnose=True, nature="node"),
    Category("dispatch", "a collective's task could not be delivered to the device or the NIC (runtime or RDMA "
             "send failed)", triage=True, diagnose=True),
    Category("watchdog_timeout", "torch_npu's watchdog gave up on a collective",
             "HCCLTimeout", triage=True, diagnose=True),
    Category("stream_sync_timeout", "a stream synchronize timed out (EE1002, 507048): the host side of an exec "
             "timeout, which pages already", triage=True, diagnose=True),
    Category("heartbeat", "a peer's heartbeat was lost or stuck: triage reads it as a hint naming the peer",
             diagnose=True),
    Category("init", "communicator init failed (rank table, bind, environment)"),
    Category("desync", "ranks disagree on the collective or its parameters, or call it with an invalid one (EI0005)",
             triage=True),
    Category("watchdog_exception", "torch_npu's HCCL watchdog died on an error: the collective failed on this rank",
             triage=True, diagnose=True),
    Category("device_oom", "the device ran out of memory (EL0004, 207001, torch_npu's NPU out of memory): the "
             "rank stops, its peers time out"),
    Category("aicore", "an AI Core, vector core or AI CPU task raised an exception or timed out (507014, 507015, "
             "507035, 507018): the rank stops, its peers time out"),
    Category("operator", "an operator or kernel package failed (EZ9999 AclNN inner errors, a kernel config that "
             "does not parse)"),
    Category("device_lost", "the device or its driver dropped out (507010 heartbeat, EL0001, 507899, "
             "drvGetDevNum)", nature="node"),
    Category("tcp_store", "c10d's TCPStore failed while HCCL was set up (store->get ... got error): the store's "
             "host or a peer went away", triage=True),
    Category("link", "an HCCS, UB or network link of the device failed under the job (507056, EJ0002, "
             "HCCL OP RETRY FAILED): the rank stops, its peers time out", nature="node"),
    Category("hbm_ecc", "the device's memory failed under the job (507053 UCE, 507054 multi-bit ECC): the rank "
             "stops, its peers time out", nature="node"),
    Category("program_error", "the program called an API wrongly (an invalid argument, handle or unsupported "
             "feature: EL0003, 107000, E10001): the program failed, the node is fine", nature="program"),
    Category("config_error", "the job's configuration or environment is wrong (a file, path, option or "
             "permission: E13001): the program failed, the node is fine", nature="config"),
    Category("other", "an HCCL error line that no rule knows", nature="unknown"),
)

HCCL_TIMEOUT_CATEGORIES = frozenset(c.name for c in CATEGORIES if c.pages == "HCCLTimeout")
TRIAGE_FAILURE_CATEGORIES = frozenset(c.name for c in CATEGORIES if c.triage)
DIAGNOSE_TIMEOUT_CATEGORIES = frozenset(c.name for c in CATEGORIES if c.diagnose)
# The program or its configuration failed and the node is fine: never a WARN or FAIL of the node, never paged.
PROGRAM_CATEGORIES = frozenset(c.name for c in CATEGORIES if c.nature in ("program", "config"))


def paged_by(alert: str) -> tuple[str, ...]:
    """The categories whose new incidents page ``alert``, in table order."""
    return tuple(c.name for c in CATEGORIES if c.pages == alert)


def category_matcher(alert: str) -> str:
    """The PromQL label matcher that selects the categories ``alert`` pages on."""
    names = paged_by(alert)
    if len(names) == 1:
        return f'category="{names[0]}"'
    return f'category=~"{"|".join(names)}"'


# Ascend codes whose category is known; any other E[IJEHLZ]dddd code is "other".
ASCEND_CODE_CATEGORIES: dict[str, str] = {
    "EI0001": "init",  # invalid environment variable
    "EI0002": "exec_timeout",
    "EI0004": "init",  # rank table could not be loaded
    "EI0005": "desync",
    "EI0006": "connect_timeout",
    "EI0007": "init",  # resource initialisation failed
    "EI0008": "desync",
    "EI0009": "init",
    "EI0010": "connect_timeout",  # P2P link between devices failed
    "EI0011": "init",  # QP memory could not be allocated
    "EI0012": "sdma",
    "EI0013": "roce_cqe",
    "EI0014": "init",  # cluster information check (duplicate superDeviceId, IPs)
    "EI0015": "rendezvous_timeout",
    "EI0016": "desync",  # TLS switch differs between ranks
    "EI0017": "init",  # rank table content
    "EI0018": "roce_cqe",  # UB CQE: the same completion error on the 950 UB fabric
    "EI0019": "init",  # bind IP/port
    "EI0020": "init",  # bind IP/port
    "EE1002": "stream_sync_timeout",
    "507046": "stream_sync_timeout",
    "507048": "stream_sync_timeout",
    "EL0004": "device_oom",  # memory allocation failed
    "207001": "device_oom",  # ACL: memory allocation failed
    "507014": "aicore",  # AI Core execution timed out
    "507015": "aicore",  # AI Core execution exception
    "507035": "aicore",  # vector core execution exception
    "507001": "sdma",  # the SDMA copy failed
    "507013": "sdma",  # System DMA hardware execution error
    "EZ1001": "operator",  # AclNN parameter error
    "EL0001": "device_lost",  # device not found
    "507010": "device_lost",  # the task scheduler lost the device's heartbeat
    "507899": "device_lost",  # driver internal error

    "EJ0001": "init",
    "EJ0002": "init",
    "EJ0003": "init",  # bind IP/port failed
    "EJ0004": "init",  # rank table IP differs from the NIC's
}


# Generic envelope codes: "an error inside this module", whose text says what it is. One never leads over a
# specific reading of the same line or block (collectors.hccl.rules).
ENVELOPE_CODES = frozenset({"EI9999", "EE9999", "EH9999", "EZ9999", "EL9999", "EJ9999"})


def category_of_code(code: str) -> str:
    """Category of a printed code by the packaged table (collectors.hccl.errtable): a code no registry lists has
    its family's; the envelopes, and what is no code, are ``other``."""
    from collectors.hccl import errtable  # the table is generated with this module's overrides

    if code in ASCEND_CODE_CATEGORIES:
        return ASCEND_CODE_CATEGORIES[code]
    if code[:3] == "ERR":
        return errtable.torch_npu(code).category
    if code.isdigit() and len(code) == 6:
        return errtable.acl(code).category
    if _CANN_CODE_RE.fullmatch(code):
        return errtable.cann(code).category
    return "other"


_CANN_CODE_RE = re.compile(r"[EWI][0-9A-Z]\d{4}")
_ASCEND_CODE_FULL_RE = re.compile(r"[EWI][0-9A-Z]\d{4}|\d{6}|ERR\d{5}|retCode=0x[0-9a-f]+|InnerCode=0x[0-9a-f]+")


def is_ascend_code(code: str) -> bool:
    """Whether a code is one the log printed (EI0002, 507048), not a synthetic one (notify_wait)."""
    return _ASCEND_CODE_FULL_RE.fullmatch(code) is not None
