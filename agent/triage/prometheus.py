"""``npuwatch triage --prometheus URL``: the evidence records from the fleet's series instead of bundles.

Every npuwatch agent exports its last incident window (collectors/hccl/incident_window.py); a
Prometheus that scrapes the fleet holds them all, labelled by node. ``read_evidence`` asks its
HTTP API (``/api/v1/query``, ``/api/v1/query_range``; urllib, a timeout on every call, basic auth
and TLS options) for the window ``[start, end]`` and builds the same records ``npuwatch triage
PATH...`` builds from logs, so ``agent.triage.engine.analyze`` runs unchanged:

===========================================================  ====================================
series (over the window, at its end)                         record
===========================================================  ====================================
``npu_hccl_rank_last_seen_timestamp_seconds{comm,rank,npu}``  ``RankSeen`` (node, NPU, rank size
                                                             from ``npu_hccl_comm_ranks``)
``npu_hccl_rank_timeout_timestamp_seconds{comm,rank,npu}``   ``RankFailure`` at that time (its
                                                             code: the node's newest timeout-like
                                                             code of ``npu_hccl_errors_total``)
``npu_hccl_peer_blamed_timestamp_seconds{comm,how,rank,       ``Blame``
address}``
``npu_roce_ip_info{npu,address}``                            ``Address`` (device IP -> node, NPU)
``npu_fault_since_timestamp_seconds{kind}`` (range)          ``LocalFault`` via
                                                             ``agent.triage.series`` (the node's
                                                             own judgement), dated by its value,
                                                             ended at the last step when over
``up``                                                       the nodes read; ``up == 0`` at the
                                                             end is a problem of the report
``ALERTS{alertname="NPUJobStraggler", alertstate="firing",    ``JobStraggler`` via
job=~"<job>|"}`` (range)                                     ``agent.triage.stragglers``: the
                                                             fleet rules' finding, as it fired
===========================================================  ====================================

Several servers (``--prometheus A --prometheus B``: the shards of a sharded layout, or a
VictoriaMetrics beside a Prometheus) are read one by one and their records joined as one fleet
(``read_fleet``): ranks, blames and device addresses of nodes on different shards meet in the
engine, which is where the cross-node join happens; a record two servers both hold (an HA pair
scraping the same node) counts once. One that cannot be read is a problem of the report, the
others still count. The credential and TLS options apply to every URL.

VictoriaMetrics answers the same API with the same series (its ``-search.latencyOffset``, 30 s by
default, hides the newest samples: set it to the scrape interval or less, or end the window that
much earlier, docs/fleet-scale.md).

Nodes are named by the ``node`` label (the agents' ``labels.node``), else ``instance``. The
window's series use ``max_over_time`` / ``last_over_time``, so a series that expired on its
agent since the incident still counts; faults come from a range query with a step of
``end - start`` / 720 (at least 1 s), its last step at ``end``.
"""

from __future__ import annotations

import json
import math
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from agent.core.http_client import (
    ClientTls,
    basic_auth_header,
    build_opener,
    check_url,
    connection_problem,
    read_password,
)
from agent.health.log_categories import LOG_CATEGORIES, fault_of
from agent.triage.evidence import Address, Blame, Evidence, JobStraggler, LocalFault, RankFailure, RankSeen, Window
from agent.triage.series import FAULT_METRIC, faults_from_samples
from agent.triage.stragglers import fleet_alerts, straggler_of
from collectors.hccl.codes import TRIAGE_FAILURE_CATEGORIES

__all__ = [
    "DEFAULT_WINDOW_S",
    "PASSWORD_ENV",
    "PrometheusClient",
    "PrometheusError",
    "PrometheusSource",
    "add_arguments",
    "closed_window",
    "read_evidence",
    "read_fleet",
    "source_from_args",
    "sources_from_args",
]

DEFAULT_WINDOW_S = 3600.0
RANGE_POINTS = 720
MAX_SERIES = 200_000  # per query: a Prometheus answer larger than this is refused, not parsed
SYNTHETIC_CODE = ("task_exec_timeout", "exec_timeout")  # a rank timeout whose node counted no code

class PrometheusError(Exception):
    """Prometheus could not be asked or did not answer usefully (the report is then unreadable)."""


@dataclass(frozen=True)
class PrometheusSource:
    """Where the fleet's Prometheus is and how to talk to it."""

    url: str
    timeout_s: float = 30.0
    username: str | None = None
    password: str | None = None
    ca_file: str | None = None
    insecure: bool = False  # skip TLS certificate verification
    job: str = "npuwatch"

    def __post_init__(self) -> None:
        check_url(self.url, "--prometheus")
        if self.timeout_s <= 0:
            raise ValueError(f"the Prometheus timeout must be positive, got {self.timeout_s}")
        if (self.password is not None) and self.username is None:
            raise ValueError("a Prometheus password needs a user name too")


class PrometheusClient:
    """The two query endpoints of the Prometheus HTTP API, over POST (queries can be long)."""

    def __init__(self, source: PrometheusSource) -> None:
        self.source = source
        self.base = source.url.rstrip("/")
        self._opener = build_opener(self.base, ClientTls(ca_file=source.ca_file, insecure=source.insecure))
        self._headers = {"Content-Type": "application/x-www-form-urlencoded", "Accept": "application/json",
                         **basic_auth_header(source.username, source.password)}
        self.warnings: list[str] = []

    def _call(self, endpoint: str, params: Mapping[str, str]) -> Any:
        url = f"{self.base}/api/v1/{endpoint}"
        body = urllib.parse.urlencode(params).encode()
        # the scheme is http or https: PrometheusSource refuses any other
        request = urllib.request.Request(url, data=body, headers=self._headers, method="POST")  # noqa: S310
        try:
            with self._opener.open(request, timeout=self.source.timeout_s) as response:
                raw = response.read()
        except urllib.error.HTTPError as exc:
            raise PrometheusError(f"{url}: HTTP {exc.code} {_api_error(exc.read()) or exc.reason}") from None
        except (urllib.error.URLError, OSError) as exc:
            raise PrometheusError(f"cannot reach {url}: {connection_problem(exc)}") from None
        try:
            answer = json.loads(raw)
        except ValueError:
            raise PrometheusError(f"{url}: the answer is not JSON (is this a Prometheus?)") from None
        if not isinstance(answer, dict) or answer.get("status") != "success" or "data" not in answer:
            detail = answer.get("error") if isinstance(answer, dict) else None
            raise PrometheusError(f"{url}: {detail or 'unexpected answer'}")
        self.warnings.extend(str(w) for w in answer.get("warnings") or [])
        data = answer["data"]
        result = data.get("result") if isinstance(data, dict) else None
        if not isinstance(result, list):
            raise PrometheusError(f"{url}: no result list in the answer")
        if len(result) > MAX_SERIES:
            raise PrometheusError(f"{url}: {len(result)} series for {params.get('query')!r}, more than {MAX_SERIES}")
        return result

    def query(self, expr: str, at: float) -> list[tuple[dict[str, str], float]]:
        """An instant vector: (labels, value) per series (NaN values skipped)."""
        rows = []
        for item in self._call("query", {"query": expr, "time": _time(at)}):
            value = float(item["value"][1])
            if not math.isnan(value):
                rows.append((dict(item.get("metric") or {}), value))
        return rows

    def query_range(self, expr: str, start: float, end: float, step: float) -> list[tuple[dict[str, str],
                                                                                         list[tuple[float, float]]]]:
        """A range vector: (labels, [(time, value)...]) per series."""
        params = {"query": expr, "start": _time(start), "end": _time(end), "step": f"{step:g}"}
        return [(dict(item.get("metric") or {}), [(float(t), float(v)) for t, v in item.get("values") or []])
                for item in self._call("query_range", params)]


def _api_error(raw: bytes) -> str:
    try:
        answer = json.loads(raw)
    except ValueError:
        return ""
    return str(answer.get("error") or "") if isinstance(answer, dict) else ""


def _time(at: float) -> str:
    return f"{at:.3f}"


def _duration(seconds: float) -> str:
    return f"{max(1, math.ceil(seconds))}s"


def _node(labels: Mapping[str, str]) -> str:
    return labels.get("node") or labels.get("instance") or "unknown"


def _int(text: str | None) -> int | None:
    return int(text) if text is not None and text.isdigit() else None


def _step(start: float, end: float) -> float:
    return float(max(1, math.ceil((end - start) / RANGE_POINTS)))


@dataclass
class _Reader:
    client: PrometheusClient
    job: str
    start: float
    end: float

    def sel(self, metric: str, *matchers: str) -> str:
        return f'{metric}{{{",".join((f"job={json.dumps(self.job)}", *matchers))}}}'

    @property
    def span(self) -> str:
        return _duration(self.end - self.start)

    def over(self, function: str, metric: str) -> list[tuple[dict[str, str], float]]:
        return self.client.query(f"{function}({self.sel(metric)}[{self.span}])", self.end)


def closed_window(window: Window, now: float) -> Window:
    """The window Prometheus is asked about: up to ``now`` and from an hour before its end, unless given."""
    end = window.end if window.end is not None else now
    start = window.start if window.start is not None else end - DEFAULT_WINDOW_S
    if start >= end:
        raise ValueError(f"the window is empty: it starts at {start:.0f} and ends at {end:.0f}")
    return Window(start, end)


def read_evidence(client: PrometheusClient, window: Window) -> Evidence:
    """The evidence the fleet's series hold for a closed ``window`` (``closed_window``)."""
    if window.start is None or window.end is None:
        raise ValueError("read_evidence needs a closed window")
    start, end = window.start, window.end
    reader = _Reader(client, client.source.job, start, end)
    evidence = Evidence()
    source = f"Prometheus {client.base}"
    # `up` is Prometheus's own series: it carries the target's labels, not the agent's `node`
    nodes = {labels["instance"]: _node(labels) for labels, _ in reader.over("last_over_time", "npuwatch_build_info")
             if labels.get("instance")}
    for labels, value in reader.over("last_over_time", "up"):
        node = labels.get("node") or nodes.get(labels.get("instance", ""), _node(labels))
        coverage = evidence.coverage(node)
        coverage.inputs.append(source)
        coverage.saw(start)
        coverage.saw(end)
        if value == 0:
            evidence.problems.append(f"{node}: its npuwatch agent was down at {end:.0f} (up 0 in {source})")
    if not evidence.nodes:
        evidence.problems.append(f"{source}: no up{{job={client.source.job!r}}} series in the window")
    sizes = {labels.get("comm", ""): int(value)
             for labels, value in reader.over("max_over_time", "npu_hccl_comm_ranks")}
    _ranks(reader, evidence, sizes)
    _failures(reader, evidence, sizes, _codes(reader))
    _blames(reader, evidence)
    for labels, _ in reader.over("last_over_time", "npu_roce_ip_info"):
        if labels.get("address"):
            evidence.addresses.append(Address(labels["address"], _node(labels), _int(labels.get("npu")),
                                              source=f"hccn_tool -ip of {_node(labels)}"))
    found = _faults(reader)
    exported = {(fault.node, fault.npu, fault.kind) for fault in found}
    evidence.faults.extend(found)
    # a log fault the node's agent already exports as a finding is that finding
    evidence.faults.extend(fault for fault in _log_faults(reader)
                           if (fault.node, fault.npu, fault.kind) not in exported)
    evidence.stragglers.extend(_stragglers(reader, source))
    evidence.fleet_view = True
    evidence.problems.extend(f"{source}: {warning}" for warning in client.warnings)
    return evidence


def read_fleet(sources: Sequence[PrometheusSource], window: Window) -> Evidence:
    """The evidence of every server in ``sources`` joined as one fleet (duplicate records counted once)."""
    evidence = Evidence()
    for source in sources:
        try:
            evidence.extend(read_evidence(PrometheusClient(source), window))
        except PrometheusError as exc:
            evidence.problems.append(str(exc))
    if len(sources) > 1:
        _dedupe(evidence)
    return evidence


def _dedupe(evidence: Evidence) -> None:
    """Drop records equal to an earlier one (the same node's series read from two servers; the records
    are frozen dataclasses)."""
    for name in _EVIDENCE_LISTS:
        records = getattr(evidence, name)
        records[:] = list(dict.fromkeys(records))
    evidence.problems[:] = list(dict.fromkeys(evidence.problems))


_EVIDENCE_LISTS = ("ranks", "failures", "blames", "addresses", "faults", "stragglers")


def _ranks(reader: _Reader, evidence: Evidence, sizes: Mapping[str, int]) -> None:
    for labels, value in reader.over("max_over_time", "npu_hccl_rank_last_seen_timestamp_seconds"):
        rank, comm = _int(labels.get("rank")), labels.get("comm")
        if rank is None or not comm:
            continue
        node = _node(labels)
        evidence.ranks.append(RankSeen(comm, rank, node, sizes.get(comm), _int(labels.get("npu")), at=value,
                                       source=f"{node}'s HCCL logs"))


def _codes(reader: _Reader) -> dict[str, tuple[str, str]]:
    """Per node, the timeout-like (code, category) its scanner counted in the window: the one of the
    newest category, an Ascend code (EI0002) before a synthetic one (task_exec_timeout)."""
    categories = "|".join(sorted(TRIAGE_FAILURE_CATEGORIES))
    errors = reader.sel("npu_hccl_errors_total", f'category=~"{categories}"')
    last = reader.sel("npu_hccl_last_error_timestamp_seconds", f'category=~"{categories}"')
    # counted in the window: the counter rose, or its series is new since the window's start
    counted = f"increase({errors}[{reader.span}]) > 0 or ({errors} unless {errors} offset {reader.span})"
    newest = {(_node(labels), labels.get("category", "")): value
              for labels, value in reader.client.query(f"max_over_time({last}[{reader.span}])", reader.end)}
    best: dict[str, tuple[float, bool, str, str]] = {}
    for labels, _ in reader.client.query(counted, reader.end):
        node, category, code = _node(labels), labels.get("category", ""), labels.get("code", "")
        candidate = (newest.get((node, category), 0.0), code[:1] in ("E", "5"), code, category)
        if node not in best or candidate > best[node]:
            best[node] = candidate
    return {node: (code, category) for node, (_, _, code, category) in best.items()}


def _failures(reader: _Reader, evidence: Evidence, sizes: Mapping[str, int],
              codes: Mapping[str, tuple[str, str]]) -> None:
    for labels, value in reader.over("max_over_time", "npu_hccl_rank_timeout_timestamp_seconds"):
        rank, comm = _int(labels.get("rank")), labels.get("comm")
        if not comm or not reader.start <= value <= reader.end:
            continue
        node = _node(labels)
        code, category = codes.get(node, SYNTHETIC_CODE)
        evidence.failures.append(RankFailure(node, value, code, category, comm, rank, sizes.get(comm),
                                             _int(labels.get("npu")), source=f"{node}'s HCCL logs"))
        evidence.coverage(node).saw(value)


def _blames(reader: _Reader, evidence: Evidence) -> None:
    for labels, value in reader.over("max_over_time", "npu_hccl_peer_blamed_timestamp_seconds"):
        if not reader.start <= value <= reader.end:
            continue
        node = _node(labels)
        evidence.blames.append(Blame(node, value, labels.get("how", "waited_on"), labels.get("comm") or None,
                                     rank=_int(labels.get("rank")), ip=labels.get("address") or None,
                                     source=f"{node}'s HCCL logs"))


def _faults(reader: _Reader) -> list[LocalFault]:
    """The findings the nodes' agents exported in the range (``npu_fault_since_timestamp_seconds``), each from
    when its agent found it (or the first step that shows it) to the last step (``until`` unset while it still
    shows at the end)."""
    step = _step(reader.start, reader.end)
    first = reader.end - math.floor((reader.end - reader.start) / step) * step
    # (node, npu, kind) -> [fault as the newest step shows it, first bad time, last bad time]
    spans: dict[tuple[str, int | None, str], list[Any]] = {}
    for labels, points in reader.client.query_range(reader.sel(FAULT_METRIC), first, reader.end, step):
        node = _node(labels)
        for at, value in points:
            for fault in faults_from_samples(node, [(FAULT_METRIC, labels, value)], seen_at=at):
                key = (fault.node, fault.npu, fault.kind)
                if key not in spans:
                    spans[key] = [fault, at, at]
                else:
                    spans[key][0], spans[key][2] = fault, max(spans[key][2], at)
                    spans[key][1] = min(spans[key][1], at)
    faults = []
    for fault, first_seen, last in spans.values():
        began = fault.at if fault.at is not None and fault.at <= first_seen else first_seen
        still_on = last >= reader.end - step
        faults.append(LocalFault(fault.node, fault.npu, fault.kind, fault.detail, at=began, seen_at=last,
                                 until=None if still_on else last, source="Prometheus range query"))
    return faults


def _stragglers(reader: _Reader, source: str) -> list[JobStraggler]:
    """The fleet rules' stragglers that fired in the window (their alerts carry no scrape job of their own:
    a ``host`` finding has none), each from its first firing step, ``until`` its last when it ended before."""
    step = _step(reader.start, reader.end)
    first = reader.end - math.floor((reader.end - reader.start) / step) * step
    found = []
    for labels, points in reader.client.query_range(fleet_alerts(reader.job), first, reader.end, step):
        times = [at for at, value in points if not math.isnan(value)]
        if not times:
            continue
        until = None if max(times) >= reader.end - step else max(times)
        straggler = straggler_of(labels, at=min(times), until=until, source=f"{labels.get('alertname')} in {source}")
        if straggler is not None:
            found.append(straggler)
    return found


def _log_faults(reader: _Reader) -> list[LocalFault]:
    """The failures that stop a rank (device OOM, AI Core, SDMA...) its node's scanner saw in the window: node
    faults at the newest such error (the series carries no NPU)."""
    names = [c.name for c in LOG_CATEGORIES if c.fault is not None]
    last = reader.sel("npu_hccl_last_error_timestamp_seconds", f'category=~"{"|".join(names)}"')
    faults = []
    for labels, value in reader.client.query(f"max_over_time({last}[{reader.span}])", reader.end):
        category = labels.get("category", "")
        fault = fault_of(category, "") if category in names else None
        if fault is None or not reader.start <= value <= reader.end:
            continue
        node = _node(labels)
        faults.append(LocalFault(node, None, fault.kind, f"{fault.label} ({node}'s HCCL logs)", at=value,
                                 source=f"{node}'s HCCL logs"))
    return faults


PASSWORD_ENV = "NPUWATCH_PROMETHEUS_PASSWORD"  # noqa: S105 - the variable's name, not a password


def add_arguments(parser: Any) -> None:
    """The ``--prometheus`` options of ``npuwatch triage`` (an argparse parser)."""
    group = parser.add_argument_group("online triage (from the fleet's Prometheus instead of, or beside, PATHs)")
    group.add_argument("--prometheus", metavar="URL", action="append",
                       help="a Prometheus that scrapes the npuwatch agents, e.g. http://prometheus:9090, or a "
                            "VictoriaMetrics (http://victoria:8428); repeat it for each shard: their evidence "
                            "is joined as one fleet, and the options below apply to every URL; "
                            "--since defaults to 1h")
    group.add_argument("--prometheus-job", dest="prometheus_job", default="npuwatch", metavar="JOB",
                       help="the agents' scrape job (default npuwatch)")
    group.add_argument("--prometheus-timeout", dest="prometheus_timeout", default="30s", metavar="DURATION",
                       help="per request (default 30s)")
    group.add_argument("--prometheus-user", dest="prometheus_user", metavar="USER", help="basic auth user")
    group.add_argument("--prometheus-password-file", dest="prometheus_password_file", metavar="FILE",
                       help=f"basic auth password, first line of FILE (default: ${PASSWORD_ENV})")
    group.add_argument("--prometheus-ca-file", dest="prometheus_ca_file", metavar="FILE",
                       help="CA bundle for an https:// URL")
    group.add_argument("--prometheus-insecure", dest="prometheus_insecure", action="store_true",
                       help="do not verify the server's TLS certificate")


def sources_from_args(args: Any, environ: Mapping[str, str] | None = None) -> list[PrometheusSource]:
    """One ``PrometheusSource`` per ``--prometheus`` URL, each with the same credentials, TLS options and job."""
    urls = getattr(args, "prometheus", None) or []
    if isinstance(urls, str):
        urls = [urls]
    return [source_from_args(args, environ, url=url) for url in dict.fromkeys(urls)]


def source_from_args(args: Any, environ: Mapping[str, str] | None = None, url: str | None = None) -> PrometheusSource:
    """The ``PrometheusSource`` the options describe for ``url`` (default: the first ``--prometheus``);
    ValueError names a bad one."""
    if url is None:
        given = getattr(args, "prometheus", None)
        url = given if isinstance(given, str) else (given or [""])[0]
    from agent.core.config_values import parse_duration

    password = read_password(getattr(args, "prometheus_password_file", None), "--prometheus-password-file",
                             PASSWORD_ENV, getattr(args, "prometheus_user", None), environ)
    try:
        timeout = parse_duration(getattr(args, "prometheus_timeout", "30s"))
    except ValueError:
        raise ValueError(f"--prometheus-timeout: not a duration: {args.prometheus_timeout!r}") from None
    return PrometheusSource(url, timeout_s=timeout, username=getattr(args, "prometheus_user", None),
                            password=password, ca_file=getattr(args, "prometheus_ca_file", None),
                            insecure=bool(getattr(args, "prometheus_insecure", False)),
                            job=getattr(args, "prometheus_job", None) or "npuwatch")
