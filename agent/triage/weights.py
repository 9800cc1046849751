"""The weights ``npuwatch triage`` scores culprits with: one table, read by the scoring and the flight recorder.

A culprit's score is a sum over independent kinds of evidence (the more kinds agree, the higher);
local faults weigh what ``agent.triage.faults`` says (its ``FaultKind.weight``), corroborated and
scaled here. Changing a weight is one line below and the test that pins it
(tests/unit/test_triage_weights.py).
"""

from __future__ import annotations

__all__ = ["WEIGHTS"]

WEIGHTS: dict[str, float] = {
    # peers' logs name it (heartbeat lost or stuck, remote rank waited on, unreachable link peer, CQE
    # peer, missing from the rendezvous): blame_base + blame_share x the share of reporting ranks
    "blame_base": 1.0,
    "blame_share": 2.0,
    # shared among the silent ranks, when at least half the ranks reported
    "silence": 1.5,
    # flight recorder: the rank furthest behind (hang), outside the majority at one collective
    # (desync), a weaker variant of either, a rank without a dump
    "flight_hang": 3.0,
    "flight_desync": 3.0,
    "flight_weak": 1.5,
    "flight_no_dump": 1.0,
    # a rank whose failed operation differs from the majority's at the same operation index
    "hccl_desync": 3.0,
    # a rank whose HCCL_ENTRY_LOG_ENABLE entries stop before the others'
    "entry_behind": 1.5,
    # each other kind of local fault in the incident's span adds this to the best fault, up to the max
    "fault_corroboration": 0.2,
    "fault_corroboration_max": 0.6,
    # the endpoint that the links with RoCE errors share (agent.triage.links), over each of its peers
    "shared_endpoint": 1.5,
    # a fault on an NPU or node nothing else points at, that runs a rank of the communicator
    "member_factor": 0.5,
    # a fault at least this heavy names the cause; a culprit scoring this is named
    "strong_fault": 2.0,
    "named_score": 1.5,
}
