"""Triage's faults as entities of the fault knowledge graph (``collectors.fault_graph``), and the chain
from a culprit's fault to the HCCL error the incident shows, in words.

The graph says which fault leads to which; this module says which of its entities a triage fault
kind is (``KIND_ENTITIES``), which HCCL entity a log line is (the knowledge table's phrasings, else
its category: EI0002, a task's exec timeout, is a notify wait that timed out), and what each entity
on a chain is called. A kind with no entity here (a chip too hot, a probe) takes part in no chain.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from agent.triage.evidence import LocalFault
from collectors.fault_graph import chain, default_graph
from collectors.hccl.knowledge import KNOWLEDGE, match_knowledge

__all__ = ["CATEGORY_ENTITIES", "KIND_ENTITIES", "Chain", "entity_label", "failure_entity", "fault_chain",
           "logged_entity"]

LINK_DOWN_EVENT = "0x81078603"  # the port's link went from up to down

KIND_ENTITIES: dict[str, str] = {
    "link_down": LINK_DOWN_EVENT,
    "link_down_once": LINK_DOWN_EVENT,
    "link_flap": "Comp_Network_Custom_01",
    "net_health": "Comp_Network_Custom_03",
    "optics_dark": "Comp_Network_Custom_09",
    "optics_weak": "Comp_Network_Custom_08",
    "optics_out_of_range": "Comp_Network_Custom_08",
    "roce_cqe": "AISW_CANN_HCCL_029",
}

# A failure line no phrasing of the knowledge table matches still has a category; these two are one
# entity each (a RoCE CQE error is 029's "retransmissions ran out").
CATEGORY_ENTITIES: dict[str, str] = {
    "exec_timeout": "AISW_CANN_HCCL_027",
    "roce_cqe": "AISW_CANN_HCCL_029",
}

_LABELS: dict[str, str] = {
    LINK_DOWN_EVENT: "the port's link went from up to down",
    "Comp_Network_Custom_01": "the NPU port's link flapped",
    "Comp_Network_Custom_02": "the port's FEC mode is wrong",
    "Comp_Network_Custom_03": "the port's network health check failed",
    "Comp_Network_Custom_05": "no optical module in the port",
    "Comp_Network_Custom_06": "the NPU driver failed",
    "Comp_Network_Custom_07": "the port has no IP address",
    "Comp_Network_Custom_08": "the optics' power is out of range",
    "Comp_Network_Custom_09": "the optics send or receive no light",
    "Comp_Network_Custom_10": "the optics lost lock",
    "Comp_Network_Custom_11": "the fibre or copper cable is faulty",
    **{entry.entity: entry.means for entry in KNOWLEDGE},
}


def entity_label(entity: str) -> str:
    """``the port's link went from up to down (0x81078603)``; an entity we have no words for by its id."""
    label = _LABELS.get(entity)
    if label is None:
        return f"event {entity}" if entity.startswith("0x") else entity
    return f"{label} ({entity})"


_CODE_ENTITIES: dict[str, str] = {}
for _entry in KNOWLEDGE:
    _CODE_ENTITIES.setdefault(_entry.code, _entry.entity)


def failure_entity(code: str, category: str) -> str | None:
    """The HCCL entity of a failure report: the knowledge table's entry counted under its code, else its category's."""
    return _CODE_ENTITIES.get(code) or CATEGORY_ENTITIES.get(category)


def logged_entity(text: str, category: str) -> str | None:
    """The HCCL entity of a classified log line: its phrasing in the knowledge table, else its category's."""
    entry = match_knowledge(text)
    return entry.entity if entry is not None else CATEGORY_ENTITIES.get(category)


class Chain:
    """A path of the graph from a culprit's fault to an HCCL fault of the incident."""

    def __init__(self, fault: LocalFault, path: Sequence[str]) -> None:
        self.fault = fault
        self.path = tuple(path)

    def text(self) -> str:
        steps = " -> ".join(entity_label(entity) for entity in self.path)
        return f"fault graph: {steps} (in the incident's logs)"


def fault_chain(faults: Iterable[LocalFault], incident_entities: Iterable[str]) -> Chain | None:
    """The shortest chain from the first of ``faults`` (most convincing first) that has one."""
    targets = set(incident_entities)
    if not targets:
        return None
    graph = default_graph()
    for fault in faults:
        source = KIND_ENTITIES.get(fault.kind)
        if source is None:
            continue
        path = chain(graph, [source], targets)
        if path is not None:
            return Chain(fault, path)
    return None
