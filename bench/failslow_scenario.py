"""The fail-slow scenario format (docs/failslow.md): a training job's shape, its noise, and its events.

A scenario is one JSON object; ``load(path)`` reads and checks it and raises ``ScenarioError`` with the
field at fault. Faults (``compute_slow``, ``link_slow``, ``host_slow``) are what the rules must name;
``checkpoint``, ``eval`` and ``restart`` are job-wide events that must page nobody.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["DEFAULTS", "FAULTS", "KINDS", "Event", "Scenario", "ScenarioError", "load", "parse"]

FAULTS = ("compute_slow", "link_slow", "host_slow")
KINDS = (*FAULTS, "checkpoint", "eval", "restart")

# Every optional field and its default (docs/failslow.md explains each).
DEFAULTS: dict[str, Any] = {
    "name": "",
    "job": "train-0",
    "seed": 1,
    "compute_fraction": 0.7,  # of a healthy step spent computing; the rest in collectives
    "pp_imbalance": 0.15,  # the last pipeline stage computes this much longer
    "warmup_s": 120.0,  # after the start and after each restart: irregular, slower steps
    "warmup_jitter": 0.2,  # per rank and step, compute time x uniform(1 - j, 1 + j) during warm-up
    "step_jitter": 0.02,  # per rank and step, compute time x (1 + normal(0, j))
    "scrape_s": 5.0,  # the agent's sampling interval for these series
    "scrape_jitter_s": 1.0,  # each scrape late or early by up to this
    "scrape_miss": 0.005,  # probability that a scrape is lost
    "util_window_s": 5.0,  # the utilisation reading averages the chip's busy time over this
    "util_noise": 0.02,  # normal noise added to each utilisation reading
    "util_reads": 5,  # readings the agent averages into each exported value, scrape_s / util_reads apart
    "link_bytes_per_s": 25e9,  # port line rate
    "pfc_background_per_s": 2.0,  # PFC pause frames a healthy port receives
    "pfc_bursts_per_port_hour": 0.5,  # transient congestion: bursts of pause frames on one port
    "pfc_burst_per_s": 3000.0,
    "pfc_burst_max_s": 10.0,
    "host_cpu": 0.35,  # host CPU busy fraction of a healthy node
    "host_cpu_noise": 0.05,
}


class ScenarioError(ValueError):
    """The file is not a scenario: the message names the field."""


@dataclass(frozen=True)
class Event:
    kind: str
    start: float
    end: float
    factor: float = 1.0
    ranks: tuple[int, ...] = ()
    pair: tuple[int, int] | None = None
    node: int | None = None

    @property
    def fault(self) -> bool:
        return self.kind in FAULTS

    @property
    def cause(self) -> str:
        return self.kind.split("_", 1)[0]

    def active(self, t: float) -> bool:
        return self.start <= t < self.end


@dataclass(frozen=True)
class Scenario:
    nodes: int
    npus_per_node: int
    tp: int
    pp: int
    dp: int
    step_s: float
    duration_s: float
    events: tuple[Event, ...]
    params: Mapping[str, Any] = field(default_factory=dict)

    @property
    def ranks(self) -> int:
        return self.nodes * self.npus_per_node

    def __getattr__(self, name: str) -> Any:  # the optional fields, as attributes
        params = self.__dict__.get("params", {})
        if name in DEFAULTS:
            return params.get(name, DEFAULTS[name])
        raise AttributeError(name)

    def node_of(self, rank: int) -> int:
        return rank // self.npus_per_node

    def stage_of(self, rank: int) -> int:
        """Megatron's order: tensor-parallel fastest, then data-parallel, then the pipeline stage."""
        return rank // (self.tp * self.dp)


def _number(obj: Mapping[str, Any], key: str, where: str, low: float = 0.0, integer: bool = False) -> Any:
    value = obj.get(key)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or (integer and not isinstance(value, int)):
        raise ScenarioError(f"{where}{key}: {'an integer' if integer else 'a number'} is required, got {value!r}")
    if value < low:
        raise ScenarioError(f"{where}{key}: at least {low} is required, got {value!r}")
    return value


def _event(raw: Any, index: int, scenario: Scenario) -> Event:
    where = f"events[{index}]."
    if not isinstance(raw, dict):
        raise ScenarioError(f"events[{index}]: an object is required")
    kind = raw.get("kind")
    if kind not in KINDS:
        raise ScenarioError(f"{where}kind: one of {', '.join(KINDS)} is required, got {kind!r}")
    start = float(_number(raw, "start", where))
    end = float(_number(raw, "end", where))
    if end <= start:
        raise ScenarioError(f"{where}end: after start is required")
    factor = float(_number(raw, "factor", where, 1.0)) if kind in FAULTS else 1.0
    ranks: tuple[int, ...] = ()
    pair = None
    node = None
    if kind == "compute_slow":
        values = raw.get("ranks")
        if not isinstance(values, list) or not values or not all(
                isinstance(r, int) and not isinstance(r, bool) and 0 <= r < scenario.ranks for r in values):
            raise ScenarioError(f"{where}ranks: a list of ranks below {scenario.ranks} is required")
        ranks = tuple(values)
    elif kind == "link_slow":
        values = raw.get("pair")
        if not isinstance(values, list) or len(values) != 2 or not all(
                isinstance(r, int) and not isinstance(r, bool) and 0 <= r < scenario.ranks for r in values):
            raise ScenarioError(f"{where}pair: two ranks below {scenario.ranks} are required")
        pair = (values[0], values[1])
    elif kind == "host_slow":
        node = int(_number(raw, "node", where, 0, integer=True))
        if node >= scenario.nodes:
            raise ScenarioError(f"{where}node: below {scenario.nodes} is required")
    return Event(kind, start, end, factor, ranks, pair, node)


def parse(document: Any) -> Scenario:
    if not isinstance(document, dict):
        raise ScenarioError("a JSON object is required")
    unknown = set(document) - set(DEFAULTS) - {"nodes", "npus_per_node", "tp", "pp", "dp", "step_s", "duration_s",
                                                "events", "description"}
    if unknown:
        raise ScenarioError(f"unknown fields: {', '.join(sorted(unknown))}")
    shape = {key: _number(document, key, "", 1, integer=True) for key in ("nodes", "npus_per_node", "tp", "pp", "dp")}
    if shape["tp"] * shape["pp"] * shape["dp"] != shape["nodes"] * shape["npus_per_node"]:
        raise ScenarioError("tp x pp x dp must equal nodes x npus_per_node")
    params = {key: document[key] for key in DEFAULTS if key in document}
    for key, value in params.items():
        if key in ("name", "job"):
            if not isinstance(value, str):
                raise ScenarioError(f"{key}: a string is required")
        elif key == "util_reads":
            _number(params, key, "", 1, integer=True)
        else:
            _number(params, key, "")
    scenario = Scenario(step_s=float(_number(document, "step_s", "", 0.1)),
                        duration_s=float(_number(document, "duration_s", "", 60)), events=(), params=params,
                        **shape)
    raw_events = document.get("events", [])
    if not isinstance(raw_events, list):
        raise ScenarioError("events: a list is required")
    events = tuple(_event(raw, i, scenario) for i, raw in enumerate(raw_events))
    return Scenario(scenario.nodes, scenario.npus_per_node, scenario.tp, scenario.pp, scenario.dp,
                    scenario.step_s, scenario.duration_s, events, params)


def load(path: Path) -> Scenario:
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ScenarioError(f"{path}: {exc}") from None
    try:
        return parse(document)
    except ScenarioError as exc:
        raise ScenarioError(f"{path}: {exc}") from None
