"""RoCE network health probe result: ``hccn_tool -i <devid> -net_health -g``.

Sample output::

    net health status: Success

Seen states: ``Success``, ``Fault``, ``Init``, ``Socket failed`` (free text, may
contain spaces). Only ``Success`` counts as healthy; ``Init`` (no detection
target configured yet) is exported as unhealthy with its own state label so a
dashboard can tell it apart. Exported: ``npu_roce_net_healthy{npu}`` and
``npu_roce_net_health_state{npu,state} 1`` with the state lowercased and spaces
turned into underscores (``socket_failed``). The state is a label, so a state
that is not printable ASCII of at most 32 characters is a ``ParseError``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from collectors.base import ChipRef, CollectContext, ParseError, Sample, label_pairs
from collectors.bounds import is_label_text
from collectors.hccn_link import clean_lines, hccn_source, raise_unparsable

__all__ = ["SOURCE", "NetHealthRecord", "parse", "samples", "state_label"]

_STATUS_RE = re.compile(r"^net\s+health\s+status\s*:\s*(?P<state>.*?)\s*$", re.IGNORECASE)


@dataclass(frozen=True)
class NetHealthRecord:
    state: str  # as printed, e.g. "Socket failed"

    @property
    def healthy(self) -> bool:
        return self.state.casefold() == "success"


def state_label(state: str) -> str:
    """``Socket failed`` -> ``socket_failed``."""
    return "_".join(state.lower().split())


def parse(text: str) -> NetHealthRecord:
    for line_no, line in clean_lines(text):
        match = _STATUS_RE.match(line)
        if match is None:
            continue
        state = match.group("state")
        if not state:
            raise ParseError("empty net health status", line_no, line)
        if not is_label_text(state, max_chars=32):
            raise ParseError("net health status is not printable ASCII of at most 32 characters", line_no, line)
        return NetHealthRecord(state=state)
    raise_unparsable(text, "a 'net health status' line")


def samples(record: NetHealthRecord, chip: ChipRef, ctx: CollectContext) -> list[Sample]:
    port = label_pairs(npu=chip.npu, chip=chip.chip)
    return [
        Sample("npu_roce_net_healthy", port, 1.0 if record.healthy else 0.0),
        Sample("npu_roce_net_health_state", (*port, ("state", state_label(record.state))), 1.0),
    ]


SOURCE = hccn_source("hccn_net_health", "net_health", parse, samples)
