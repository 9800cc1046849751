"""Which fault leads to which: the propagation edges of ascend-faultdiag's knowledge graph.

The edges are data (``collectors/fault_data/fault_graph.json``, derived from Huawei's Apache-2.0
``kg-config.json``: see the NOTICE there): each entity id (a hardware event code such as
``0x81078603``, a network fault such as ``Comp_Network_Custom_01``, an HCCL log fault such as
``AISW_CANN_HCCL_014``) with the ids its ``rule`` entries name as ``dst_code``. Only the edge
structure is kept; what each entity means in our terms is ``agent.triage.fault_chain``'s.

``chain`` is a breadth-first search, written here because the graph is small (about 530 edges) and
the one question asked of it (the shortest path from any of some faults to any of some others,
the same path every run) needs no graph library.
"""

from __future__ import annotations

import json
from collections import deque
from collections.abc import Iterable, Mapping
from functools import lru_cache
from pathlib import Path
from typing import Any

__all__ = ["GRAPH_FILE", "chain", "default_graph", "load_graph", "parse_graph"]

GRAPH_FILE = Path(__file__).with_name("fault_data") / "fault_graph.json"

Graph = Mapping[str, tuple[str, ...]]


def parse_graph(raw: Any) -> dict[str, tuple[str, ...]]:
    """The edges of a ``kg-config.json`` document: entity -> the entities it leads to, sorted, no self-loops.

    ValueError when the document is not a knowledge repository."""
    if not isinstance(raw, dict) or not isinstance(raw.get("knowledge-repository"), dict):
        raise ValueError("not an ascend-faultdiag knowledge graph: no 'knowledge-repository' object")
    edges: dict[str, tuple[str, ...]] = {}
    for entity, body in raw["knowledge-repository"].items():
        rules = body.get("rule") if isinstance(body, dict) else None
        targets = {rule["dst_code"] for rule in rules or () if isinstance(rule, dict)
                   and isinstance(rule.get("dst_code"), str) and rule["dst_code"] != entity}
        if targets:
            edges[str(entity)] = tuple(sorted(targets))
    return edges


def load_graph(path: str | Path) -> dict[str, tuple[str, ...]]:
    """The packaged form: ``{"edges": {entity: [entity, ...]}}``. OSError or ValueError when unreadable."""
    data = json.loads(Path(path).read_text(encoding="utf-8"))
    edges = data.get("edges") if isinstance(data, dict) else None
    if not isinstance(edges, dict) or not all(isinstance(v, list) for v in edges.values()):
        raise ValueError(f"{path}: no 'edges' object of lists")
    return {str(k): tuple(str(t) for t in v) for k, v in edges.items()}


@lru_cache(maxsize=1)
def default_graph() -> dict[str, tuple[str, ...]]:
    return load_graph(GRAPH_FILE)


def chain(graph: Graph, sources: Iterable[str], targets: Iterable[str], max_steps: int = 4) -> tuple[str, ...] | None:
    """The shortest path from one of ``sources`` to one of ``targets`` (both ends included), or None.

    Among paths of one length the first in source order, then in sorted edge order: the same every run.
    A source that is itself a target is no chain (nothing led to anything)."""
    wanted = set(targets)
    for_sources = list(dict.fromkeys(sources))
    best: tuple[str, ...] | None = None
    for source in for_sources:
        found = _shortest(graph, source, wanted, max_steps)
        if found is not None and (best is None or len(found) < len(best)):
            best = found
    return best


def _shortest(graph: Graph, source: str, wanted: set[str], max_steps: int) -> tuple[str, ...] | None:
    queue: deque[tuple[str, ...]] = deque([(source,)])
    seen = {source}
    while queue:
        path = queue.popleft()
        if len(path) > max_steps:
            return None
        for following in graph.get(path[-1], ()):
            if following in seen:
                continue
            if following in wanted:
                return (*path, following)
            seen.add(following)
            queue.append((*path, following))
    return None
