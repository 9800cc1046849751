"""Fleet baselines: the median of each measure over the nodes of one chip model.

File format (JSON; ``npuwatch check-baseline`` writes it, ``npuwatch check --baseline FILE`` reads it)::

    {
      "format": "npuwatch-check-baseline/1",
      "generated_at": "2026-12-01T03:00:00Z",
      "source": "prometheus http://prometheus:9090",
      "models": {
        "910B3": {
          "hbm_bandwidth": {"median": 1.49e12, "nodes": 412, "unit": "bytes_per_second"},
          "gemm:fp16":     {"median": 2.95e14, "nodes": 412, "unit": "flop_per_second"}
        }
      }
    }

``median`` is over every chip (or chip pair, for ``p2p_bandwidth``) of the fleet's nodes of that
model, in base units; ``nodes`` is how many nodes contributed. Model names match after
normalisation (``Ascend910B3`` = ``910B3``). Measure names are those of ``npuwatch check --json``
(``results[].measure``).

From Prometheus (the agents export every measurement with its model; ``level`` is dropped so a
medium and a long run of the same node count once), for ``M`` in ``npu_check_bandwidth_bytes_per_second``
and ``npu_check_flops``::

    quantile by (model, measure) (0.5, max without (level) (M{job="npuwatch"}))
    count by (model, measure) (max by (model, measure, job, instance) (M{job="npuwatch"}))
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agent.check.references import Reference, measure_unit
from agent.probes.peaks import normalise_model

__all__ = [
    "FORMAT",
    "PROMQL",
    "Baseline",
    "BaselineError",
    "Entry",
    "from_prometheus",
    "from_reports",
    "load_baseline",
]

FORMAT = "npuwatch-check-baseline/1"
_FAMILIES = ("npu_check_bandwidth_bytes_per_second", "npu_check_flops")
PROMQL = {
    family: (
        f'quantile by (model, measure) (0.5, max without (level) ({family}{{job="npuwatch"}}))',
        f'count by (model, measure) (max by (model, measure, job, instance) ({family}{{job="npuwatch"}}))',
    )
    for family in _FAMILIES
}
_MAX_FILE_BYTES = 16 << 20


class BaselineError(ValueError):
    """A baseline that cannot be used; the message says which file or server and why."""


@dataclass(frozen=True)
class Entry:
    median: float
    nodes: int
    unit: str | None = None


@dataclass
class Baseline:
    source: str
    models: dict[str, dict[str, Entry]] = field(default_factory=dict)
    generated_at: str | None = None

    def reference(self, model: str | None, measure: str, min_nodes: int) -> Reference | None:
        """The fleet median of ``measure`` for ``model`` as a gating reference; None when unknown or
        backed by fewer than ``min_nodes`` nodes."""
        if not model:
            return None
        wanted = normalise_model(model)
        for name, measures in self.models.items():
            if normalise_model(name) != wanted:
                continue
            entry = measures.get(measure)
            if entry is None or entry.nodes < min_nodes:
                return None
            return Reference(entry.median, f"fleet median of {entry.nodes} {name} nodes ({self.source})", True,
                             fleet=True)
        return None

    def to_dict(self) -> dict[str, Any]:
        return {
            "format": FORMAT,
            "generated_at": self.generated_at,
            "source": self.source,
            "models": {
                model: {measure: {"median": entry.median, "nodes": entry.nodes, "unit": entry.unit}
                        for measure, entry in sorted(measures.items())}
                for model, measures in sorted(self.models.items())
            },
        }


def _now_text() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def parse_baseline(raw: Any, source: str) -> Baseline:
    """A baseline from its JSON document; BaselineError names every problem's place."""
    if not isinstance(raw, dict) or raw.get("format") != FORMAT:
        raise BaselineError(f"{source}: not an npuwatch baseline (expected \"format\": \"{FORMAT}\")")
    models = raw.get("models")
    if not isinstance(models, dict):
        raise BaselineError(f"{source}: \"models\" must map model names to measures")
    baseline = Baseline(source=str(raw.get("source") or source), generated_at=raw.get("generated_at"))
    for model, measures in models.items():
        if not isinstance(measures, dict):
            raise BaselineError(f"{source}: models.{model} must map measure names to entries")
        for measure, entry in measures.items():
            where = f"{source}: models.{model}.{measure}"
            if not isinstance(entry, dict):
                raise BaselineError(f"{where}: expected {{\"median\": ..., \"nodes\": ...}}")
            median, nodes = entry.get("median"), entry.get("nodes")
            if isinstance(median, bool) or not isinstance(median, (int, float)) or not median > 0:
                raise BaselineError(f"{where}.median: expected a positive number, got {median!r}")
            if isinstance(nodes, bool) or not isinstance(nodes, int) or nodes < 1:
                raise BaselineError(f"{where}.nodes: expected a positive integer, got {nodes!r}")
            baseline.models.setdefault(str(model), {})[str(measure)] = Entry(
                float(median), nodes, entry.get("unit") or measure_unit(str(measure)))
    return baseline


def load_baseline(path: str | Path) -> Baseline:
    try:
        with open(path, "rb") as handle:
            data = handle.read(_MAX_FILE_BYTES + 1)
    except OSError as exc:
        raise BaselineError(f"{path}: {exc.strerror or exc}") from None
    if len(data) > _MAX_FILE_BYTES:
        raise BaselineError(f"{path}: larger than {_MAX_FILE_BYTES >> 20} MiB")
    try:
        raw = json.loads(data)
    except ValueError as exc:
        raise BaselineError(f"{path}: not JSON: {exc}") from None
    baseline = parse_baseline(raw, str(path))
    baseline.source = f"file {path}"
    return baseline


# ----------------------------------------------------------------------------- building one


def from_reports(reports: Iterable[tuple[str, Mapping[str, Any]]]) -> Baseline:
    """A baseline from ``npuwatch check --json`` outputs, one per node: ``(where, document)``.

    Every measured result counts (each chip, each pair); a node counts once per measure.
    """
    values: dict[tuple[str, str], list[float]] = {}
    nodes: dict[tuple[str, str], set[str]] = {}
    sources = 0
    for where, document in reports:
        sources += 1
        node = str(document.get("node") or where)
        for check in document.get("checks", []):
            for result in check.get("results", []):
                measure, model, value = result.get("measure"), result.get("model"), result.get("value")
                if not measure or not model or isinstance(value, bool) or not isinstance(value, (int, float)):
                    continue
                key = (normalise_model(str(model)), str(measure))
                values.setdefault(key, []).append(float(value))
                nodes.setdefault(key, set()).add(node)
    baseline = Baseline(source=f"{sources} check reports", generated_at=_now_text())
    for (model, measure), found in sorted(values.items()):
        baseline.models.setdefault(model, {})[measure] = Entry(
            _median(found), len(nodes[(model, measure)]), measure_unit(measure))
    return baseline


def _median(values: Iterable[float]) -> float:
    import statistics  # here: the agent's check job imports this module, and statistics costs it ~0.5 MB

    return statistics.median(values)


def _query(url: str, expr: str, timeout_s: float) -> list[dict[str, Any]]:
    # Imported here: the agent's check job imports this module and asks no Prometheus unless configured to,
    # and the HTTP client (urllib, http.client, email) is about 1 MB of its memory.
    import urllib.parse
    import urllib.request

    from agent.core.http_client import connection_problem

    full = url.rstrip("/") + "/api/v1/query?" + urllib.parse.urlencode({"query": expr})
    if not full.startswith(("http://", "https://")):
        raise BaselineError(f"{url}: expected an http:// or https:// URL")
    try:
        with urllib.request.urlopen(full, timeout=timeout_s) as response:  # noqa: S310 - scheme checked above
            body = json.loads(response.read(_MAX_FILE_BYTES))
    except (OSError, ValueError) as exc:
        raise BaselineError(f"prometheus {url}: {connection_problem(exc)}") from None
    if not isinstance(body, dict) or body.get("status") != "success":
        raise BaselineError(f"prometheus {url}: query failed: {str(body)[:200]}")
    result = body.get("data", {}).get("result", [])
    return result if isinstance(result, list) else []


def from_prometheus(url: str | Sequence[str], timeout_s: float = 10.0) -> Baseline:
    """The fleet medians from a Prometheus server that scrapes the agents (queries in ``PROMQL``), or from
    several (the shards of a sharded layout): then each one's per-node values (``PER_NODE``), the
    median taken here over all of them, a node that two servers scrape counted once."""
    urls = [url] if isinstance(url, str) else list(dict.fromkeys(url))
    if not urls:
        raise BaselineError("no Prometheus URL")
    if len(urls) > 1:
        return _from_shards(urls, timeout_s)
    url = urls[0]
    baseline = Baseline(source=f"prometheus {url}", generated_at=_now_text())
    for median_query, count_query in PROMQL.values():
        counts = {(s["metric"].get("model", ""), s["metric"].get("measure", "")): s["value"][1]
                  for s in _query(url, count_query, timeout_s)}
        for series in _query(url, median_query, timeout_s):
            model, measure = series["metric"].get("model", ""), series["metric"].get("measure", "")
            try:
                median, nodes = float(series["value"][1]), int(float(counts.get((model, measure), 0)))
            except (KeyError, IndexError, ValueError, TypeError):
                continue
            if model and measure and median > 0 and nodes > 0:
                baseline.models.setdefault(model, {})[measure] = Entry(median, nodes, measure_unit(measure))
    return baseline


# Per shard: each chip's (or pair's) value, its level dropped as in PROMQL's median.
PER_NODE = {family: f'max without (level) ({family}{{job="npuwatch"}})' for family in _FAMILIES}


def _from_shards(urls: Sequence[str], timeout_s: float) -> Baseline:
    values: dict[tuple[str, str], dict[tuple[tuple[str, str], ...], float]] = {}
    for url in urls:
        for query in PER_NODE.values():
            for series in _query(url, query, timeout_s):
                labels = series.get("metric") or {}
                model, measure = labels.get("model", ""), labels.get("measure", "")
                try:
                    value = float(series["value"][1])
                except (KeyError, IndexError, ValueError, TypeError):
                    continue
                if model and measure and not math.isnan(value):
                    values.setdefault((model, measure), {})[tuple(sorted(labels.items()))] = value
    baseline = Baseline(source=f"prometheus {' '.join(urls)}", generated_at=_now_text())
    for (model, measure), found in sorted(values.items()):
        nodes = {(dict(key).get("job", ""), dict(key).get("instance", "")) for key in found}
        median = _median(found.values())
        if median > 0:
            baseline.models.setdefault(model, {})[measure] = Entry(median, len(nodes), measure_unit(measure))
    return baseline
