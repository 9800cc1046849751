"""The packaged propagation edges (collectors/fault_data/fault_graph.json) against ascend-faultdiag's knowledge
graph they are derived from, and the chain search over them; the words triage gives each entity."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from agent.triage.fault_chain import CATEGORY_ENTITIES, KIND_ENTITIES, entity_label, failure_entity, logged_entity
from agent.triage.faults import FAULT_KINDS
from collectors.fault_graph import chain, default_graph, load_graph, parse_graph
from collectors.hccl.knowledge import KNOWLEDGE

REFERENCE = Path(os.environ.get("NPUWATCH_REFERENCE") or Path(__file__).resolve().parents[3] / "shared" / "reference")
KG = REFERENCE / "faults" / "kg-config.json"

needs_reference = pytest.mark.skipif(not KG.is_file(), reason=f"no knowledge graph at {KG}")


@needs_reference
def test_the_packaged_edges_are_the_knowledge_graphs() -> None:
    reference = parse_graph(json.loads(KG.read_text(encoding="utf-8")))
    assert default_graph() == reference
    assert sum(len(targets) for targets in reference.values()) == 517


@needs_reference
def test_every_entity_triage_names_is_in_the_knowledge_graph() -> None:
    entities = set(json.loads(KG.read_text(encoding="utf-8"))["knowledge-repository"])
    assert set(KIND_ENTITIES.values()) | set(CATEGORY_ENTITIES.values()) <= entities


def test_the_issues_example_edges_are_packaged() -> None:
    graph = default_graph()
    assert "AISW_CANN_HCCL_014" in graph["0x81078603"]
    assert {"AISW_CANN_HCCL_027", "AISW_CANN_HCCL_029", "0x81078603"} <= set(graph["Comp_Network_Custom_01"])


def test_triage_maps_only_kinds_it_has() -> None:
    assert set(KIND_ENTITIES) <= set(FAULT_KINDS)


GRAPH = {"a": ("b", "c"), "b": ("d",), "c": ("d", "e"), "d": ("f",), "e": ("f",), "x": ("x2",)}


def test_the_shortest_chain_wins_and_ties_go_to_sorted_edges() -> None:
    assert chain(GRAPH, ["a"], ["d"]) == ("a", "b", "d")
    assert chain(GRAPH, ["a"], ["f"]) == ("a", "b", "d", "f")
    assert chain(GRAPH, ["x", "c"], ["f"]) == ("c", "d", "f")


def test_a_chain_needs_a_step_and_stays_within_its_length() -> None:
    assert chain(GRAPH, ["d"], ["d"]) is None
    assert chain(GRAPH, ["a"], ["f"], max_steps=2) is None
    assert chain(GRAPH, ["a"], ["f"], max_steps=3) == ("a", "b", "d", "f")
    assert chain(GRAPH, ["x"], ["f"]) is None
    assert chain(GRAPH, ["a"], []) is None


def test_parse_graph_drops_self_loops_and_rejects_other_documents() -> None:
    raw = {"knowledge-repository": {"a": {"rule": [{"dst_code": "b"}, {"dst_code": "a"}, {"dst_code": "b"}]},
                                    "b": {"attribute": {}}, "c": {"rule": [{"other": 1}]}}}
    assert parse_graph(raw) == {"a": ("b",)}
    with pytest.raises(ValueError, match="knowledge-repository"):
        parse_graph({"edges": {}})


def test_load_graph_rejects_a_file_without_edges(tmp_path: Path) -> None:
    path = tmp_path / "graph.json"
    path.write_text('{"edges": {"a": "b"}}')
    with pytest.raises(ValueError, match="no 'edges' object of lists"):
        load_graph(path)


def test_entities_are_named_in_our_words_with_their_id() -> None:
    assert entity_label("0x81078603") == "the port's link went from up to down (0x81078603)"
    assert entity_label("AISW_CANN_HCCL_014") == "the RDMA NIC could not be initialised (AISW_CANN_HCCL_014)"
    assert entity_label("0x80E01801") == "event 0x80E01801"
    assert entity_label("AISW_CANN_GE_033") == "AISW_CANN_GE_033"


def test_a_log_line_is_its_knowledge_phrasing_else_its_category() -> None:
    assert logged_entity("[ERROR] HCCL(1,p):x [a.cc:1] [1]rdma init fail, ret[-1]", "init") == "AISW_CANN_HCCL_014"
    assert logged_entity("[Heartbeat]cqe err status[12]", "other") == "AISW_CANN_HCCL_029"
    assert logged_entity("Task run failed", "exec_timeout") == "AISW_CANN_HCCL_027"
    assert logged_entity("something else", "init") is None
    assert failure_entity("rdma_init_failed", "init") == "AISW_CANN_HCCL_014"
    assert failure_entity("EI0002", "exec_timeout") == "AISW_CANN_HCCL_027"
    assert failure_entity("watchdog", "watchdog_timeout") is None
    assert all(failure_entity(entry.code, entry.category) for entry in KNOWLEDGE)
