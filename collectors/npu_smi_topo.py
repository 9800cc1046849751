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

An A3 (910C) container with CANN 8.5 labels rows and columns by die instead, with no
CPU Affinity column; the digits are the dies' physical ids (``npu-smi info``'s Phy-ID
column), exported as printed too::

               Phy-ID12   Phy-ID13
    Phy-ID12   X          SIO
    Phy-ID13   SIO        X

The matrix is chips squared, so a header of more than ``max_chips`` NPUs (default
64) is a ParseError, and a row for an NPU the header does not list, or a second
row for the same NPU, is dropped and listed in the result's ``rejected``
attribute (``collectors.bounds.RowList``). Link types are words of at most 16
characters; anything else ends the row's link cells.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from collectors._text import raise_unparsed
from collectors.base import ChipRef, CollectContext, ParseError, Sample, Source, label_pairs
from collectors.bounds import BOUNDS, LIMITS, Rejects, RowList, has_control_chars

__all__ = ["SOURCE", "TopoLink", "parse", "samples"]

_NPU_LABEL_RE = re.compile(r"(?:NPU|Phy-ID)([0-9]{1,12})")  # NPU3, or Phy-ID13 (A3 dies)
_LINK_TYPE_RE = re.compile(r"[A-Za-z][A-Za-z_]{0,15}")


@dataclass(frozen=True)
class TopoLink:
    """One matrix cell: ``npu`` (row) to ``peer`` (column); ``cpu_affinity`` is the row's CPU list."""

    npu: int
    peer: int
    link_type: str
    cpu_affinity: str | None


def parse(text: str, max_chips: int = LIMITS["max_chips"]) -> list[TopoLink]:
    """Every cell of the matrix, self cells (``X``) included, in printed order (a ``RowList``)."""
    peers: list[int] | None = None
    links: list[TopoLink] = []
    rejects = Rejects()
    rows_seen: set[int] = set()
    for line_no, line in enumerate(text.splitlines(), start=1):
        if len(line) > LIMITS["line_chars"] or has_control_chars(line):
            rejects.add("line too long or with control characters", line_no, line.strip())
            continue
        tokens = line.split()
        if not tokens:
            continue
        if tokens[0].lower().startswith("legend"):
            break
        row = _NPU_LABEL_RE.fullmatch(tokens[0])
        if peers is None:
            # The header starts NPU0 NPU1 ... (or "NPU0 CPU Affinity" on one NPU, or a lone "Phy-ID12" on
            # one A3 die, which prints no CPU Affinity); rows start NPU0 X ...
            second = tokens[1] if len(tokens) > 1 else "CPU"
            if row is not None and (second == "CPU" or _NPU_LABEL_RE.fullmatch(second)):
                peers = _leading_npu_labels(tokens)
                if len(peers) > max_chips:
                    raise ParseError(f"{len(peers)} NPUs in the topology header, more than max_chips={max_chips}",
                                     line_no, line.strip())
            continue
        if row is None:
            continue
        npu = int(row.group(1))
        if npu not in peers or npu in rows_seen:
            rejects.add(f"row {tokens[0]} is not a header NPU or is printed twice", line_no, line.strip())
            continue
        rows_seen.add(npu)
        links.extend(_row_links(npu, tokens[1:], peers))
    if peers is None:
        raise_unparsed(text, "npu-smi info -t topo", "no NPU header in npu-smi info -t topo output", rejects)
    return RowList.of(links, rejects.freeze())


def _leading_npu_labels(tokens: list[str]) -> list[int]:
    peers: list[int] = []
    for token in tokens:
        label = _NPU_LABEL_RE.fullmatch(token)
        if label is None or not BOUNDS["id"].contains(int(label.group(1))):
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
        for peer, link_type in zip(peers, types)
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
