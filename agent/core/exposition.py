"""Fast exposition: text 0.0.4 and OpenMetrics 1.0 rendered from snapshots, cached per source.

prometheus_client formats every sample line from scratch (label validation and escaping
per sample), which costs ~30 ms for a 16-chip node; with a store change every few
seconds most scrapes would pay it. Here each source's families are rendered once per
snapshot and kept; a scrape after a change re-renders only the changed source and the
small self-metric block. The output matches ``prometheus_client.generate_latest`` (a
test parses both and compares).
"""

from __future__ import annotations

import logging
import math
import platform
import threading
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass

import psutil

from agent import __version__
from agent.core.reload_status import ReloadStatus
from agent.core.snapshot import ERROR_REASONS, SnapshotStore, SourceSnapshot
from collectors.base import Sample
from collectors.catalogue import CATALOGUE, MetricSpec, family_of

__all__ = ["FamilyBlock", "SnapshotRenderer", "self_metric_samples", "valid_rows"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class FamilyBlock:
    name: str
    text: str
    openmetrics: str


def _escape_value(value: str) -> str:
    if "\\" in value or "\n" in value or '"' in value:
        return value.replace("\\", r"\\").replace("\n", r"\n").replace('"', r"\"")
    return value


def _escape_help(text: str) -> str:
    return text.replace("\\", r"\\").replace("\n", r"\n")


def _format_value(value: float) -> str:
    """A sample value as Go (and prometheus_client's ``floatToGoString``) writes it.

    Written here so the agent does not import prometheus_client, whose package import pulls in its HTTP
    servers and urllib (about 2 MB of the agent's memory). Where Python writes a positive number in full
    with seven or more digits before the point, Go writes it with an exponent."""
    value = float(value)
    if not math.isfinite(value):
        return "NaN" if math.isnan(value) else ("+Inf" if value > 0 else "-Inf")
    text = repr(value)
    point = text.find(".")
    if value > 0 and point > 6:
        digits = (text[:point] + text[point + 1:]).rstrip("0")
        mantissa = digits[0] + ("." + digits[1:] if len(digits) > 1 else "")
        return f"{mantissa}e+{point - 1:02d}"
    return text


def valid_rows(spec: MetricSpec, samples: Iterable[Sample]) -> Iterator[tuple[tuple[str, ...], float]]:
    """Label values and value of each usable sample: catalogue label names, first of duplicates."""
    seen: set[tuple[str, ...]] = set()
    wanted = spec.labels
    for sample in samples:
        if wanted:
            if len(sample.labels) != len(wanted):
                continue
            names, values = zip(*sample.labels)
            if names != wanted:
                log.debug("dropping %s%s: labels do not match the catalogue", spec.name, sample.labels)
                continue
        else:
            if sample.labels:
                continue
            values = ()
        if values in seen:  # one series once, whoever printed it twice
            continue
        seen.add(values)
        yield values, sample.value


def _render_histogram(spec: MetricSpec, samples: Iterable[Sample], const: Mapping[str, str]) -> FamilyBlock:
    """A histogram's _bucket, _sum and _count lines, in the order given (the builder orders them)."""
    lines = []
    for sample in samples:
        pairs = sorted([*sample.labels, *const.items()])
        labels = ",".join(f'{name}="{_escape_value(value)}"' for name, value in pairs)
        lines.append(f"{sample.metric}{{{labels}}} {_format_value(sample.value)}\n" if labels
                     else f"{sample.metric} {_format_value(sample.value)}\n")
    body = "".join(lines)
    head = f"# HELP {spec.name} {_escape_help(spec.help)}\n# TYPE {spec.name} histogram\n"
    return FamilyBlock(spec.name, head + body, head + body)


def render_family(spec: MetricSpec, samples: Iterable[Sample], const: Mapping[str, str],
                  heads: dict[tuple[str, ...], str] | None = None) -> FamilyBlock:
    """``heads``: each series' line up to its value (name and labels) by label values, from the last render
    of this family with these ``const`` labels; reused, then left holding this render's series alone."""
    if spec.type == "histogram":
        return _render_histogram(spec, samples, const)
    names = (*spec.labels, *const)
    order = sorted(range(len(names)), key=names.__getitem__)  # prometheus_client sorts label names
    prefixes = [f'{names[i]}="' for i in order]
    const_values = tuple(_escape_value(value) for value in const.values())
    lines: list[str] = []
    name = spec.name
    known = heads if heads is not None else {}
    used: dict[tuple[str, ...], str] = {}
    for values, value in valid_rows(spec, samples):
        head = known.get(values)
        if head is None:
            full = (*(_escape_value(v) for v in values), *const_values)
            if full:
                labels = '",'.join([prefix + full[i] for prefix, i in zip(prefixes, order)])
                head = f'{name}{{{labels}"}} '
            else:
                head = f"{name} "
        used[values] = head
        lines.append(f"{head}{_format_value(value)}\n")
    if heads is not None:
        heads.clear()
        heads.update(used)
    body = "".join(lines)
    help_text = _escape_help(spec.help)
    family = spec.name.removesuffix("_total") if spec.type == "counter" else spec.name
    text = f"# HELP {spec.name} {help_text}\n# TYPE {spec.name} {spec.type}\n{body}"
    openmetrics = f"# HELP {family} {help_text}\n# TYPE {family} {spec.type}\n{body}"
    return FamilyBlock(family, text, openmetrics)


STARTED_AT = psutil.Process().create_time()  # this process's start (the agent's uptime, `npuwatch top`)


def self_metric_samples(snapshots: Iterable[SourceSnapshot], expected_chips: int,
                        reload: ReloadStatus | None = None) -> list[Sample]:
    """npuwatch_build_info, npuwatch_expected_chips, npuwatch_start_time_seconds, the config reload's
    two series and the npuwatch_collector_* series."""
    out = [
        Sample("npuwatch_build_info", (("version", __version__), ("python", platform.python_version())), 1.0),
        Sample("npuwatch_expected_chips", (), float(expected_chips)),
        Sample("npuwatch_start_time_seconds", (), STARTED_AT),
        *(reload.samples() if reload is not None else ()),
    ]
    for snap in snapshots:
        collector = (("collector", snap.source),)
        out.append(Sample("npuwatch_collector_up", collector, 1.0 if snap.ok else 0.0))
        if not snap.ok:
            reason = snap.down_reason or "not_run"
            out.append(Sample("npuwatch_collector_down_reason", (*collector, ("reason", reason)), 1.0))
        if snap.duration_s is not None:
            out.append(Sample("npuwatch_collector_duration_seconds", collector, snap.duration_s))
        if snap.last_success is not None:
            out.append(Sample("npuwatch_collector_last_success_timestamp_seconds", collector, snap.last_success))
        if snap.interval_s > 0:
            out.append(Sample("npuwatch_collector_interval_seconds", collector, snap.interval_s))
        for reason in ERROR_REASONS:
            out.append(Sample("npuwatch_collector_errors_total", (*collector, ("reason", reason)),
                              float(snap.errors.get(reason, 0))))
        out.append(Sample("npuwatch_parse_rejections_total", collector, float(snap.rejections)))
    return out


def group_by_family(samples: Iterable[Sample]) -> dict[str, list[Sample]]:
    """Samples by catalogue name (a histogram's parts under the histogram's name); unknown names as they are."""
    grouped: dict[str, list[Sample]] = {}
    for sample in samples:
        grouped.setdefault(family_of(sample.metric) or sample.metric, []).append(sample)
    return grouped


def group_by_metric(samples: Iterable[Sample]) -> dict[str, list[Sample]]:
    grouped: dict[str, list[Sample]] = {}
    for sample in samples:
        grouped.setdefault(sample.metric, []).append(sample)
    return grouped


class SnapshotRenderer:
    """Renders the store; per-source family blocks are reused until that source's samples change."""

    SELF_METRICS = (
        "npuwatch_build_info",
        "npuwatch_expected_chips",
        "npuwatch_start_time_seconds",
        "npuwatch_config_last_reload_successful",
        "npuwatch_config_last_reload_success_timestamp_seconds",
        "npuwatch_collector_up",
        "npuwatch_collector_down_reason",
        "npuwatch_collector_duration_seconds",
        "npuwatch_collector_last_success_timestamp_seconds",
        "npuwatch_collector_interval_seconds",
        "npuwatch_collector_errors_total",
        "npuwatch_parse_rejections_total",
    )

    def __init__(self, store: SnapshotStore, const_labels: Mapping[str, str], expected_chips: int,
                 reload: ReloadStatus | None = None, owners: Mapping[str, str] | None = None) -> None:
        self._store = store
        # family -> the source that exports it while that source is fresh; the others' blocks of it are skipped
        # (the fail-slow readings: agent.dcmi.fast), and shown again while it is not
        self._owners = dict(owners or {})
        self._const = dict(const_labels)
        self._expected_chips = expected_chips
        self._reload = reload
        self._lock = threading.Lock()
        # source -> (the samples tuple the blocks were made from, the blocks)
        self._blocks: dict[str, tuple[tuple[Sample, ...], list[FamilyBlock]]] = {}
        # source -> family -> its series' rendered heads (render_family): a source stores the same series
        # with new values every few seconds (the fail-slow sampling's port counters every 5 s)
        self._heads: dict[str, dict[str, dict[tuple[str, ...], str]]] = {}
        self._reported: set[str] = set()

    def warm(self, snap: SourceSnapshot) -> None:
        """Render a source's blocks as soon as it stores new samples (in the collector's thread),
        so the next scrape only joins ready blocks."""
        with self._lock:
            self._source_blocks(snap)

    def _source_blocks(self, snap: SourceSnapshot) -> list[FamilyBlock]:
        cached = self._blocks.get(snap.source)
        if cached is not None and cached[0] is snap.samples:
            return cached[1]
        blocks = []
        for name, samples in sorted(group_by_family(snap.samples).items()):
            spec = CATALOGUE.get(name)
            if spec is None:
                self._report(f"dropping metric {name} from {snap.source}: not in the catalogue")
                continue
            heads = self._heads.setdefault(snap.source, {}).setdefault(name, {})
            blocks.append(render_family(spec, samples, self._const, heads))
        self._blocks[snap.source] = (snap.samples, blocks)
        return blocks

    def render(self, openmetrics: bool, only: frozenset[str] | None = None) -> bytes:
        """The exposition; ``only``: those families alone (their exposed names), without the self-metrics."""
        now = self._store.clock()
        snapshots = sorted(self._store.all(), key=lambda snap: snap.source)
        parts: list[str] = []
        seen: set[str] = set()
        with self._lock:
            live = {snap.source for snap in snapshots}
            for source in [s for s in self._blocks if s not in live]:
                del self._blocks[source]
                self._heads.pop(source, None)
            fresh = {snap.source for snap in snapshots if snap.fresh(now)}
            for snap in snapshots:
                if snap.source not in fresh:
                    continue
                for block in self._source_blocks(snap):
                    if only is not None and block.name not in only:
                        continue
                    owner = self._owners.get(block.name)
                    if owner is not None and owner != snap.source and owner in fresh:
                        continue
                    if block.name in seen:
                        self._report(f"metric family {block.name} exported by two sources; kept the first")
                        continue
                    seen.add(block.name)
                    parts.append(block.openmetrics if openmetrics else block.text)
        grouped = group_by_metric(self_metric_samples(snapshots, self._expected_chips, self._reload)
                                  if only is None else ())
        for name in self.SELF_METRICS if only is None else ():
            block = render_family(CATALOGUE[name], grouped.get(name, []), self._const)
            parts.append(block.openmetrics if openmetrics else block.text)
        if openmetrics:
            parts.append("# EOF\n")
        return "".join(parts).encode("utf-8")

    def _report(self, message: str) -> None:
        if message not in self._reported:
            self._reported.add(message)
            log.error("%s", message)
