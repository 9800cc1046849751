"""Test helpers: a real Prometheus and Alertmanager on 127.0.0.1, and a webhook that records alerts.

Used by the end-to-end test (one demo node) and the fleet test (many agents)::

    hook = WebhookReceiver().start()
    am = start_alertmanager(tmp_path, hook.url)
    rules, changes = shortened_rules(SHIPPED_RULES, tmp_path / "rules", "2s")
    prom = start_prometheus(tmp_path, ["127.0.0.1:9611"], rules, alertmanager_url=am.url,
                            target_labels={"127.0.0.1:9611": {"rack": "r1"}})
    prom.query('npu_roce_link_up == 0')
    hook.wait_for("NPURoCELinkDown", npu="3")
    ...
    prom.stop(); am.stop(); hook.stop()

Binaries: ``prometheus`` and ``prometheus-alertmanager`` (Debian packages ``prometheus`` and
``prometheus-alertmanager``; Alertmanager's own tarball names it ``alertmanager``, which is tried
too). A missing binary raises ``HarnessError``: CI installs both, so the test fails rather than
skipping. Each process runs in its own session and its whole group is killed at ``stop()``; its
output goes to a log file whose tail is part of every error raised here.
"""

from __future__ import annotations

import datetime
import json
import os
import re
import shutil
import signal
import subprocess
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import yaml

from tests.support import hold_cases
from tests.support.ports import free_port

__all__ = [
    "AMProcess",
    "HarnessError",
    "PromProcess",
    "ReceivedAlert",
    "RuleChange",
    "ScaledDuration",
    "WebhookReceiver",
    "duration_ms",
    "find_binary",
    "free_port",
    "scale_duration",
    "scale_promql_durations",
    "shortened_rules",
    "start_alertmanager",
    "start_prometheus",
    "time_scaled_rules",
]

JOB = "npuwatch"  # every shipped rule and dashboard selects job="npuwatch"
READY_TIMEOUT_S = 30.0
LOG_TAIL_BYTES = 4000


class HarnessError(RuntimeError):
    """Prometheus/Alertmanager missing, not starting, or answering with an error."""


def find_binary(*names: str, package: str) -> str:
    for name in names:
        path = shutil.which(name)
        if path:
            return path
    raise HarnessError(
        f"{' / '.join(names)} not found on PATH: install the Debian package {package} "
        "(apt-get install prometheus prometheus-alertmanager); CI installs it"
    )


_RFC3339 = re.compile(r"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(?:\.(\d+))?(Z|[+-]\d\d:\d\d)")


def rfc3339_epoch(text: str) -> float:
    """Epoch seconds of a Prometheus API time (``2026-12-01T20:51:03.123456789Z``: nanoseconds, which
    ``datetime.fromisoformat`` of Python 3.9 does not read)."""
    match = _RFC3339.fullmatch(text)
    if match is None:
        raise ValueError(f"not an RFC 3339 time: {text!r}")
    whole, fraction, zone = match.groups()
    at = datetime.datetime.strptime(whole + ("+00:00" if zone == "Z" else zone), "%Y-%m-%dT%H:%M:%S%z")
    return at.timestamp() + float(f"0.{fraction or 0}")


def _http_json(url: str, timeout: float = 5.0) -> Any:
    with urllib.request.urlopen(url, timeout=timeout) as response:
        return json.loads(response.read())


def _http_ok(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=1.0) as response:
            return bool(response.status == 200)
    except (OSError, urllib.error.URLError):
        return False


@dataclass
class _Process:
    """A server binary in its own process group, with its output in ``log_path``."""

    name: str
    popen: subprocess.Popen[bytes]
    port: int
    log_path: Path

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def log_tail(self, size: int = LOG_TAIL_BYTES) -> str:
        try:
            data = self.log_path.read_bytes()
        except OSError:
            return "(no log)"
        return data[-size:].decode(errors="replace")

    def fail(self, message: str) -> HarnessError:
        return HarnessError(f"{self.name}: {message}\n--- {self.log_path} (tail) ---\n{self.log_tail()}")

    def wait_ready(self, timeout: float = READY_TIMEOUT_S, ready_path: str = "/-/ready") -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.popen.poll() is not None:
                raise self.fail(f"exited with status {self.popen.returncode} before it was ready")
            if _http_ok(self.url + ready_path):
                return
            time.sleep(0.1)
        raise self.fail(f"not ready after {timeout:.0f}s")

    def stop(self) -> None:
        if self.popen.poll() is None:
            for sig, grace in ((signal.SIGTERM, 5.0), (signal.SIGKILL, 5.0)):
                try:
                    os.killpg(self.popen.pid, sig)
                except ProcessLookupError:
                    break
                try:
                    self.popen.wait(timeout=grace)
                    break
                except subprocess.TimeoutExpired:
                    continue
        self.popen.wait(timeout=5)


def _spawn(name: str, argv: list[str], port: int, log_path: Path) -> _Process:
    with log_path.open("ab") as log:
        popen = subprocess.Popen(
            argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True
        )
    return _Process(name, popen, port, log_path)


def _start(name: str, make_argv: Callable[[int], list[str]], log_path: Path, ready_path: str = "/-/ready") -> _Process:
    """Start on a free port; retry when another process grabbed the port in between."""
    last: HarnessError | None = None
    for _attempt in range(3):
        port = free_port()
        process = _spawn(name, make_argv(port), port, log_path)
        try:
            process.wait_ready(ready_path=ready_path)
            return process
        except HarnessError as exc:
            process.stop()
            last = exc
            if "address already in use" not in process.log_tail().lower():
                break
    assert last is not None
    raise last


# ----------------------------------------------------------------------------- Prometheus


@dataclass
class PromProcess(_Process):
    config_path: Path = field(default=Path())

    def api(self, path: str, params: Mapping[str, str] | None = None) -> Any:
        url = f"{self.url}/api/v1/{path}"
        if params:
            url += "?" + urllib.parse.urlencode(params)
        try:
            body = _http_json(url)
        except urllib.error.HTTPError as exc:
            detail = exc.read().decode(errors="replace")
            raise HarnessError(f"{url}: HTTP {exc.code}: {detail}") from None
        if body.get("status") != "success":
            raise HarnessError(f"{url}: {body}")
        return body["data"]

    def query(self, expr: str) -> list[dict[str, Any]]:
        """Instant query now: the ``result`` list (vector/matrix items; a scalar comes back as one item)."""
        data = self.api("query", {"query": expr})
        result = data["result"]
        if data["resultType"] in ("scalar", "string"):
            return [{"metric": {}, "value": result}]
        return list(result)

    def values(self, expr: str, label: str) -> dict[str, float]:
        """``{value of label: sample value}`` for an instant vector query."""
        return {item["metric"].get(label, ""): float(item["value"][1]) for item in self.query(expr)}

    def alerts(self) -> list[dict[str, Any]]:
        """Active alerts (pending and firing) as Prometheus sees them."""
        return list(self.api("alerts")["alerts"])

    def wait_rules_evaluated_after(self, wall_time: float, timeout: float = 20.0) -> None:
        """Poll until every rule group was last evaluated after ``wall_time`` (epoch seconds), so that
        the alerts Prometheus shows are judged on data from after that moment."""
        deadline = time.monotonic() + timeout
        while True:
            groups = self.api("rules")["groups"]
            if groups and all(rfc3339_epoch(group["lastEvaluation"]) > wall_time for group in groups):
                return
            if time.monotonic() > deadline:
                raise self.fail(f"rule groups not evaluated after {wall_time:.3f} within {timeout:.0f}s")
            time.sleep(0.1)

    def targets_up(self) -> bool:
        active = self.api("targets", {"state": "active"})["activeTargets"]
        return bool(active) and all(t["health"] == "up" for t in active)

    def wait_for(self, expr: str, timeout: float = 20.0, step: float = 0.25) -> list[dict[str, Any]]:
        """Poll until ``expr`` returns data; the result, or HarnessError naming the expression."""
        deadline = time.monotonic() + timeout
        while True:
            result = self.query(expr)
            if result:
                return result
            if time.monotonic() > deadline:
                raise self.fail(f"no data for {expr!r} after {timeout:.0f}s")
            time.sleep(step)


def prometheus_config(
    targets: Sequence[str],
    rule_files: Sequence[Path],
    *,
    scrape_interval: str,
    evaluation_interval: str,
    alertmanager_url: str | None,
    target_labels: Mapping[str, Mapping[str, str]] | None = None,
) -> dict[str, Any]:
    labels = target_labels or {}
    static = [{"targets": [target], **({"labels": dict(labels[target])} if target in labels else {})}
              for target in targets]
    config: dict[str, Any] = {
        "global": {"scrape_interval": scrape_interval, "scrape_timeout": scrape_interval,
                   "evaluation_interval": evaluation_interval},
        "rule_files": [str(path) for path in rule_files],
        "scrape_configs": [{"job_name": JOB, "static_configs": static}],
    }
    if alertmanager_url:
        host = urllib.parse.urlparse(alertmanager_url).netloc
        config["alerting"] = {"alertmanagers": [{"static_configs": [{"targets": [host]}]}]}
    return config


def start_prometheus(
    tmp_path: Path,
    targets: Sequence[str],
    rule_files: Sequence[Path] = (),
    *,
    scrape_interval: str = "1s",
    evaluation_interval: str = "1s",
    alertmanager_url: str | None = None,
    target_labels: Mapping[str, Mapping[str, str]] | None = None,
    enable_lifecycle: bool = False,
) -> PromProcess:
    """Prometheus scraping ``targets`` (host:port) as job ``npuwatch``; returns once /-/ready.

    ``target_labels`` adds per-target labels (e.g. ``{"127.0.0.1:9611": {"node": "n1"}}``).
    """
    binary = find_binary("prometheus", package="prometheus")
    workdir = tmp_path / "prometheus"
    workdir.mkdir(parents=True, exist_ok=True)
    config_path = workdir / "prometheus.yml"
    config = prometheus_config(targets, rule_files, scrape_interval=scrape_interval,
                               evaluation_interval=evaluation_interval, alertmanager_url=alertmanager_url,
                               target_labels=target_labels)
    config_path.write_text(yaml.safe_dump(config, sort_keys=False), encoding="utf-8")

    def argv(port: int) -> list[str]:
        args = [binary, f"--config.file={config_path}", f"--web.listen-address=127.0.0.1:{port}",
                f"--storage.tsdb.path={workdir / 'data'}", "--log.level=info"]
        return [*args, "--web.enable-lifecycle"] if enable_lifecycle else args

    process = _start("prometheus", argv, workdir / "prometheus.log")
    return PromProcess(process.name, process.popen, process.port, process.log_path, config_path)


def start_prometheus_with(config: Mapping[str, Any], workdir: Path, name: str = "prometheus",
                          extra_args: Sequence[str] = ()) -> PromProcess:
    """Prometheus on ``config`` as given (e.g. a layout of deploy/prometheus/layouts.py), data and log in
    ``workdir``, the lifecycle API on; returns once /-/ready."""
    binary = find_binary("prometheus", package="prometheus")
    workdir.mkdir(parents=True, exist_ok=True)
    config_path = workdir / "prometheus.yml"
    config_path.write_text(yaml.safe_dump(dict(config), sort_keys=False), encoding="utf-8")

    def argv(port: int) -> list[str]:
        return [binary, f"--config.file={config_path}", f"--web.listen-address=127.0.0.1:{port}",
                f"--storage.tsdb.path={workdir / 'data'}", "--log.level=info", "--web.enable-lifecycle", *extra_args]

    process = _start(name, argv, workdir / "prometheus.log")
    return PromProcess(process.name, process.popen, process.port, process.log_path, config_path)


# ----------------------------------------------------------------------------- VictoriaMetrics


def start_victoriametrics(workdir: Path, extra_args: Sequence[str] = ()) -> PromProcess:
    """VictoriaMetrics single node (Debian package victoria-metrics): its Prometheus API answers
    ``PromProcess.query``; ``-search.latencyOffset=1s`` so the newest samples are seen at once."""
    binary = find_binary("victoria-metrics", package="victoria-metrics")
    workdir.mkdir(parents=True, exist_ok=True)

    def argv(port: int) -> list[str]:
        return [binary, f"-storageDataPath={workdir / 'data'}", f"-httpListenAddr=127.0.0.1:{port}",
                "-search.latencyOffset=1s", "-retentionPeriod=1d", *extra_args]

    process = _start("victoria-metrics", argv, workdir / "victoria-metrics.log", ready_path="/health")
    return PromProcess(process.name, process.popen, process.port, process.log_path)


def start_vmagent(workdir: Path, scrape_config: Mapping[str, Any], remote_write_url: str | None = None,
                  make_args: Callable[[str, str, str], list[str]] | None = None) -> _Process:
    """vmagent scraping per ``scrape_config`` (Prometheus syntax) and remote-writing every second: to
    ``remote_write_url``, or with the flags ``make_args(scrape config path, queue dir, listen address)`` returns
    (deploy/prometheus/layouts.py ``vmagent_args``); it takes remote writes on its own address too."""
    binary = find_binary("vmagent", package="victoria-metrics")
    workdir.mkdir(parents=True, exist_ok=True)
    config_path = workdir / "scrape.yml"
    config_path.write_text(yaml.safe_dump(dict(scrape_config), sort_keys=False), encoding="utf-8")

    def argv(port: int) -> list[str]:
        listen = f"127.0.0.1:{port}"
        if make_args is not None:
            return [binary, *make_args(str(config_path), str(workdir / "queue"), listen),
                    "-remoteWrite.flushInterval=1s"]
        return [binary, f"-promscrape.config={config_path}", f"-remoteWrite.url={remote_write_url}",
                f"-remoteWrite.tmpDataPath={workdir / 'queue'}", "-remoteWrite.flushInterval=1s",
                f"-httpListenAddr={listen}"]

    return _start("vmagent", argv, workdir / "vmagent.log", ready_path="/health")


def start_vmalert(workdir: Path, args: Sequence[str]) -> _Process:
    """vmalert with ``args`` (deploy/prometheus/layouts.py ``vmalert_args``), writing back every second."""
    binary = find_binary("vmalert", package="victoria-metrics")
    workdir.mkdir(parents=True, exist_ok=True)

    def argv(port: int) -> list[str]:
        return [binary, *args, "-remoteWrite.flushInterval=1s", f"-httpListenAddr=127.0.0.1:{port}"]

    return _start("vmalert", argv, workdir / "vmalert.log", ready_path="/health")


# ----------------------------------------------------------------------------- Alertmanager


@dataclass
class AMProcess(_Process):
    config_path: Path = field(default=Path())

    def alerts(self) -> list[dict[str, Any]]:
        return list(_http_json(self.url + "/api/v2/alerts"))


def alertmanager_config(webhook_url: str, group_wait: str = "0s") -> dict[str, Any]:
    return {
        "route": {
            "receiver": "webhook",
            "group_by": ["..."],  # every alert is its own group: one notification each, no batching delay
            "group_wait": group_wait,
            "group_interval": "1s",
            "repeat_interval": "4h",
        },
        "receivers": [{"name": "webhook",
                       "webhook_configs": [{"url": webhook_url, "send_resolved": True}]}],
    }


def start_alertmanager(tmp_path: Path, webhook_url: str, group_wait: str = "0s") -> AMProcess:
    """Alertmanager sending every alert to ``webhook_url``; gossip off; returns once /-/ready."""
    workdir = tmp_path / "alertmanager"
    workdir.mkdir(parents=True, exist_ok=True)
    config_path = workdir / "alertmanager.yml"
    config_path.write_text(yaml.safe_dump(alertmanager_config(webhook_url, group_wait), sort_keys=False),
                           encoding="utf-8")
    return start_alertmanager_with(config_path, workdir)


def start_alertmanager_with(config_path: Path, workdir: Path, name: str = "alertmanager") -> AMProcess:
    """Alertmanager on ``config_path`` (data and log in ``workdir``); gossip off; returns once /-/ready."""
    binary = find_binary("prometheus-alertmanager", "alertmanager", package="prometheus-alertmanager")
    workdir.mkdir(parents=True, exist_ok=True)

    def argv(port: int) -> list[str]:
        return [binary, f"--config.file={config_path}", f"--web.listen-address=127.0.0.1:{port}",
                f"--storage.path={workdir / 'data'}", "--cluster.listen-address=", "--log.level=info"]

    process = _start(name, argv, workdir / "alertmanager.log")
    return AMProcess(process.name, process.popen, process.port, process.log_path, config_path)


# ----------------------------------------------------------------------------- webhook


@dataclass(frozen=True)
class ReceivedAlert:
    """One alert out of a webhook notification, with the time (time.time()) it arrived."""

    received_at: float
    status: str
    labels: dict[str, str]
    annotations: dict[str, str]

    @property
    def name(self) -> str:
        return self.labels.get("alertname", "")

    def matches(self, alertname: str, labels: Mapping[str, str]) -> bool:
        return self.name == alertname and all(self.labels.get(k) == v for k, v in labels.items())


class WebhookReceiver:
    """A tiny HTTP server on 127.0.0.1:0 that records every alert POSTed by Alertmanager."""

    def __init__(self) -> None:
        self.received: list[ReceivedAlert] = []
        self.payloads: list[tuple[float, dict[str, Any]]] = []
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                at = time.time()
                length = int(self.headers.get("Content-Length") or 0)
                try:
                    payload = json.loads(self.rfile.read(length) or b"{}")
                except ValueError:
                    payload = {}
                receiver._record(at, payload)
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, format: str, *args: Any) -> None:
                return

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, name="webhook", daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}/alerts"

    def start(self) -> WebhookReceiver:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def _record(self, at: float, payload: dict[str, Any]) -> None:
        alerts = [
            ReceivedAlert(at, str(a.get("status", "")), dict(a.get("labels") or {}),
                          dict(a.get("annotations") or {}))
            for a in payload.get("alerts") or []
        ]
        with self._changed:
            self.payloads.append((at, payload))
            self.received.extend(alerts)
            self._changed.notify_all()

    def alerts(self, status: str | None = "firing") -> list[ReceivedAlert]:
        with self._lock:
            return [a for a in self.received if status is None or a.status == status]

    def first(self, alertname: str, **labels: str) -> ReceivedAlert | None:
        """The earliest firing notification of ``alertname`` whose labels include ``labels``."""
        found = [a for a in self.alerts() if a.matches(alertname, labels)]
        return min(found, key=lambda a: a.received_at) if found else None

    def wait_for(self, alertname: str, timeout: float = 30.0, **labels: str) -> ReceivedAlert | None:
        deadline = time.monotonic() + timeout
        with self._changed:
            while True:
                found = [a for a in self.received if a.status == "firing" and a.matches(alertname, labels)]
                if found:
                    return min(found, key=lambda a: a.received_at)
                left = deadline - time.monotonic()
                if left <= 0:
                    return None
                self._changed.wait(left)


# ----------------------------------------------------------------------------- rules


@dataclass(frozen=True)
class RuleChange:
    file: str
    alert: str
    old_for: str
    new_for: str


_FOR_LINE = re.compile(r"^(?P<indent>\s+)for:\s*(?P<value>\S+)\s*$")
_ALERT_LINE = re.compile(r"^\s*-\s*alert:\s*(?P<name>\S+)")


def shortened_rules(
    rule_files: Iterable[Path], dest_dir: Path, new_for: str = "2s"
) -> tuple[list[Path], list[RuleChange]]:
    """Copies of ``rule_files`` with every ``for:`` set to ``new_for``; nothing else changes.

    Production windows (minutes) are too long for a test; the expressions, labels and annotations
    stay exactly as shipped. Returns the new paths and what was changed, alert by alert.
    """
    dest_dir.mkdir(parents=True, exist_ok=True)
    paths: list[Path] = []
    changes: list[RuleChange] = []
    for source in rule_files:
        alert = ""
        lines = []
        for line in source.read_text(encoding="utf-8").splitlines(keepends=True):
            if (named := _ALERT_LINE.match(line)) is not None:
                alert = named.group("name")
            elif (found := _FOR_LINE.match(line)) is not None:
                changes.append(RuleChange(source.name, alert, found.group("value"), new_for))
                line = f"{found.group('indent')}for: {new_for}\n"
            lines.append(line)
        target = dest_dir / source.name
        target.write_text("".join(lines), encoding="utf-8")
        # Same document apart from the for: values (guards the line-based rewrite).
        original = yaml.safe_load(source.read_text(encoding="utf-8"))
        rewritten = yaml.safe_load(target.read_text(encoding="utf-8"))
        _drop_for(original)
        _drop_for(rewritten)
        if original != rewritten:
            raise HarnessError(f"rewriting for: in {source} changed more than the for: values")
        paths.append(target)
    return paths, changes


def _drop_for(document: Any) -> None:
    for group in (document or {}).get("groups", []):
        for rule in group.get("rules", []):
            rule.pop("for", None)


# ----------------------------------------------------------------------------- rules on a faster clock


@dataclass(frozen=True)
class ScaledDuration:
    """One duration of a rule file rewritten by ``time_scaled_rules``: where it was, old and new."""

    file: str
    rule: str  # the alert or recording rule's name
    # "for", "hold" (the scrape-gap hold's window), "range", "offset" or "horizon" (predict_linear's seconds ahead)
    where: str
    old: str
    new: str


_DURATION_UNITS_MS = {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000, "w": 604_800_000,
                      "y": 31_536_000_000}
_DURATION_TEXT = r"(?:[0-9]+(?:ms|[smhdwy]))+"
_DURATION_PART = re.compile(r"([0-9]+)(ms|[smhdwy])")
_PROMQL_STRING = re.compile(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'|`[^`]*`')
_RANGE_OR_OFFSET = re.compile(
    rf"\[\s*(?P<range>{_DURATION_TEXT})\s*(?P<colon>:\s*(?P<step>{_DURATION_TEXT})?\s*)?\]"
    rf"|\boffset\s+(?P<sign>-?)(?P<offset>{_DURATION_TEXT})"
)


def duration_ms(text: str) -> int:
    """A Prometheus duration (``90m``, ``1h30m``, ``250ms``) in milliseconds."""
    if not re.fullmatch(_DURATION_TEXT, text):
        raise ValueError(f"not a Prometheus duration: {text!r}")
    return sum(int(number) * _DURATION_UNITS_MS[unit] for number, unit in _DURATION_PART.findall(text))


def format_duration_ms(ms: int) -> str:
    if ms <= 0:
        raise ValueError(f"a scaled duration must stay positive, got {ms} ms")
    return f"{ms // 1000}s" if ms % 1000 == 0 else f"{ms}ms"


def scale_duration(text: str, divide_by: int) -> str:
    """``text`` divided by ``divide_by``, to the millisecond: ``scale_duration("15m", 60) == "15s"``."""
    return format_duration_ms(round(duration_ms(text) / divide_by))


def scale_promql_durations(expr: str, divide_by: int) -> tuple[str, list[tuple[str, str, str]]]:
    """``expr`` with every range selector (``[15m]``, subquery ``[1h:5m]``), ``offset`` and ``predict_linear``
    horizon (its second argument, seconds ahead: ``4 * 3600`` -> ``(4 * 3600) / 60``) divided.

    Text inside string literals (label matchers such as ``=~"[1-9][0-9]{7,}"``) is never touched,
    nor are other plain numbers (``3 * 3600``). Returns the new expression and (where, old, new) per change.
    """
    changes: list[tuple[str, str, str]] = []

    def rewrite(match: re.Match[str]) -> str:
        if match.group("offset"):
            old = match.group("offset")
            new = scale_duration(old, divide_by)
            changes.append(("offset", old, new))
            return f"offset {match.group('sign')}{new}"
        old_range, step = match.group("range"), match.group("step")
        new_range = scale_duration(old_range, divide_by)
        changes.append(("range", old_range, new_range))
        if match.group("colon") is None:
            return f"[{new_range}]"
        if step is None:
            return f"[{new_range}:]"
        new_step = scale_duration(step, divide_by)
        changes.append(("range", step, new_step))
        return f"[{new_range}:{new_step}]"

    pieces: list[str] = []
    last = 0
    for literal in _PROMQL_STRING.finditer(expr):
        pieces.append(_RANGE_OR_OFFSET.sub(rewrite, expr[last:literal.start()]))
        pieces.append(literal.group(0))
        last = literal.end()
    pieces.append(_RANGE_OR_OFFSET.sub(rewrite, expr[last:]))
    return _scale_horizons("".join(pieces), divide_by, changes), changes


def _scale_horizons(expr: str, divide_by: int, changes: list[tuple[str, str, str]]) -> str:
    """Each ``predict_linear(v, h)`` as ``predict_linear(v, (h) / divide_by)``: a horizon is a time, and a window
    60 times shorter extrapolated as far would turn noise into a forecast."""
    strings = [(m.start(), m.end()) for m in _PROMQL_STRING.finditer(expr)]

    def in_string(at: int) -> bool:
        return any(start <= at < end for start, end in strings)

    out: list[str] = []
    last = 0
    for call in re.finditer(r"\bpredict_linear\s*\(", expr):
        if in_string(call.start()) or call.start() < last:
            continue
        depth, comma, close = 1, -1, -1
        at = call.end()
        while at < len(expr):
            char = expr[at]
            if not in_string(at):
                if char in "([{":
                    depth += 1
                elif char in ")]}":
                    depth -= 1
                    if depth == 0:
                        close = at
                        break
                elif char == "," and depth == 1:
                    comma = at
            at += 1
        if comma < 0 or close < 0:
            raise HarnessError(f"predict_linear without two arguments in {expr!r}")
        old = expr[comma + 1:close].strip()
        new = f"({old}) / {divide_by}"
        changes.append(("horizon", old, new))
        out.append(expr[last:comma + 1] + " " + new)
        last = close
    out.append(expr[last:])
    return "".join(out)


def time_scaled_rules(
    rule_files: Iterable[Path],
    dest_dir: Path,
    divide_by: int = 60,
    for_overrides: Mapping[str, str] | None = None,
    hold: str | None = None,
) -> tuple[list[Path], list[ScaledDuration]]:
    """Copies of ``rule_files`` on a clock ``divide_by`` times faster; nothing but durations changes.

    Every ``for:`` and every range selector and ``offset`` in an expression is divided by
    ``divide_by`` (60: a production minute is a test second), so windows keep their proportions to
    each other (``increase(...[15m])`` under ``for: 10m`` becomes ``[15s]`` under ``for: 10s``).
    ``for_overrides`` (alert name -> duration) sets the ``for:`` of the alerts whose ``for:`` is tied
    to something other than the clock (e.g. a number of probe runs). ``hold``, when given, replaces
    the window of every hold (the canonical form of ``tests.support.hold_cases``) instead of scaling
    it: how long an alert outlives a scrape gap must cover an agent
    restart, which does not get 60 times faster with the clock. Numbers in expressions
    (``3 * 3600``) and annotation text stay as shipped.
    """
    overrides = dict(for_overrides or {})
    dest_dir.mkdir(parents=True, exist_ok=True)
    paths: list[Path] = []
    changes: list[ScaledDuration] = []
    unused = set(overrides)
    for source in rule_files:
        document = yaml.safe_load(source.read_text(encoding="utf-8"))
        for group in document.get("groups", []):
            for rule in group.get("rules", []):
                name = str(rule.get("alert") or rule.get("record"))
                if "for" in rule:
                    old = str(rule["for"])
                    new = overrides.get(name) or scale_duration(old, divide_by)
                    unused.discard(name)
                    rule["for"] = new
                    changes.append(ScaledDuration(source.name, name, "for", old, new))
                if "alert" in rule and (held := hold_cases.parse_hold(str(rule["expr"]))) is not None:
                    old = held.window
                    new_hold = hold or scale_duration(old, divide_by)
                    rule["expr"] = hold_cases.hold_expr(held.series, held.gate, new_hold)
                    changes.append(ScaledDuration(source.name, name, "hold", old, new_hold))
                    continue
                rule["expr"], found = scale_promql_durations(str(rule["expr"]), divide_by)
                changes += [ScaledDuration(source.name, name, where, old, new) for where, old, new in found]
        target = dest_dir / source.name
        target.write_text(yaml.safe_dump(document, sort_keys=False, allow_unicode=True, width=1000),
                          encoding="utf-8")
        paths.append(target)
    if unused:
        raise HarnessError(f"for_overrides name alerts without a for: in these files: {sorted(unused)}")
    return paths, changes


# The conftest fixtures ``prometheus`` and ``alertmanager`` are factories of these types.
StartPrometheus = Callable[..., PromProcess]
StartAlertmanager = Callable[..., AMProcess]
