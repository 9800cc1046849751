"""Parser and samples for ``npu-smi info -t topo``: the link type between every pair of NPUs.

Reproduce by hand: ``npu-smi info -t topo`` (no ``-i``). Sample (910B1 x8)::

               NPU0       NPU1       ...  NPU7       CPU Affinity
    NPU0       X          HCCS       ...  HCCS       144-167
    NPU1       HCCS       X          ...  HCCS       0-23
    Legend:
      X    = Self
      HCCS = Connection traversing HCCS.

Exposition::

    npu_topology_link{npu="0",peer="1",link_type="HCCS"} 1

Link types seen: X, HCCS, HCCS_SW, SIO, UB, SYS, PHB, PIX, PXB, NA. Columns are
``%-11s`` padded but the 950 doc shrinks them after NPU3, so rows are split on
whitespace. The ``NPUn`` labels are logic (device) indices and are exported as
printed (the digits).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from collectors._text import raise_unparsed
from collectors.base import ChipRef, CollectContext, Sample, Source, label_pairs

__all__ = ["SOURCE", "TopoLink", "parse", "samples"]

_NPU_LABEL_RE = re.compile(r"NPU([0-9]{1,12})")
_LINK_TYPE_RE = re.compile(r"[A-Za-z][A-Za-z_]*")


@dataclass(frozen=True, slots=True)
class TopoLink:
    """One matrix cell: ``npu`` (row) to ``peer`` (column); ``cpu_affinity`` is the row's CPU list."""

    npu: int
    peer: int
    link_type: str
    cpu_affinity: str | None


def parse(text: str) -> list[TopoLink]:
    """Every cell of the matrix, self cells (``X``) included, in printed order."""
    peers: list[int] | None = None
    links: list[TopoLink] = []
    for line in text.splitlines():
        tokens = line.split()
        if not tokens:
            continue
        if tokens[0].lower().startswith("legend"):
            break
        row = _NPU_LABEL_RE.fullmatch(tokens[0])
        if peers is None:
            # The header starts NPU0 NPU1 ... (or "NPU0 CPU Affinity" on one NPU); rows start NPU0 X ...
            second = tokens[1] if len(tokens) > 1 else "CPU"
            if row is not None and (second == "CPU" or _NPU_LABEL_RE.fullmatch(second)):
                peers = _leading_npu_labels(tokens)
            continue
        if row is None:
            continue
        links.extend(_row_links(int(row.group(1)), tokens[1:], peers))
    if peers is None:
        raise_unparsed(text, "npu-smi info -t topo", "no NPU header in npu-smi info -t topo output")
    return links


def _leading_npu_labels(tokens: list[str]) -> list[int]:
    peers: list[int] = []
    for token in tokens:
        label = _NPU_LABEL_RE.fullmatch(token)
        if label is None:
            break
        peers.append(int(label.group(1)))
    return peers


def _row_links(npu: int, cells: list[str], peers: list[int]) -> list[TopoLink]:
    types: list[str] = []
    for cell in cells[: len(peers)]:
        if not _LINK_TYPE_RE.fullmatch(cell):
            break  # a short row: the CPU affinity already started
        types.append(cell)
    affinity = " ".join(cells[len(types):]) or None
    return [
        TopoLink(npu=npu, peer=peer, link_type=link_type, cpu_affinity=affinity)
        for peer, link_type in zip(peers, types, strict=False)
    ]




def samples(links: Sequence[TopoLink], _chip: ChipRef | None, _ctx: CollectContext) -> list[Sample]:
    """``npu_topology_link{npu,peer,link_type} 1`` for every pair except an NPU with itself."""
    seen: set[tuple[int, int]] = set()
    out: list[Sample] = []
    for link in links:
        if link.peer == link.npu or (link.npu, link.peer) in seen:
            continue
        seen.add((link.npu, link.peer))
        labels = label_pairs(npu=link.npu, peer=link.peer, link_type=link.link_type)
        out.append(Sample("npu_topology_link", labels, 1.0))
    return out


def _source_samples(records: Sequence[Any], chip: ChipRef | None, ctx: CollectContext) -> list[Sample]:
    return samples([record for record in records if isinstance(record, TopoLink)], chip, ctx)


SOURCE = Source(
    name="npu_smi_topo",
    tool="npu-smi",
    group="inventory",
    scope="node",
    argv=lambda _chip: ["info", "-t", "topo"],
    parse=parse,
    samples=_source_samples,
    # Opt-in: a static chips-squared matrix (240 series on 16 chips) that no alert needs.
    default_enabled=False,
)
