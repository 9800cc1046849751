"""Turn a dashboard builder into the JSON document we commit, byte for byte stable."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from grafana_foundation_sdk.cog.encoder import JSONEncoder

if TYPE_CHECKING:
    from grafana_foundation_sdk.builders.dashboard import Dashboard

__all__ = ["dumps", "render"]


def render(builder: Dashboard) -> dict[str, Any]:
    """Build, encode to plain JSON types and number the panels 1..n in layout order.

    Panel ids are part of the panel's URL (``viewPanel=``), so they are assigned
    from the layout order rather than left to Grafana: same code, same ids.
    """
    document: dict[str, Any] = json.loads(json.dumps(builder.build(), cls=JSONEncoder))
    next_id = 1
    for panel in document.get("panels", []):
        panel["id"] = next_id
        next_id += 1
        for nested in panel.get("panels", []):
            nested["id"] = next_id
            next_id += 1
    return document


def dumps(document: dict[str, Any]) -> str:
    """The committed text form: sorted keys, two-space indent, trailing newline."""
    return json.dumps(document, sort_keys=True, indent=2, ensure_ascii=False) + "\n"
