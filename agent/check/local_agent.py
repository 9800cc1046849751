"""Is the local npuwatch agent up, and are its collectors? Read from its own exposition.

The agent is asked on its configured port (``/metrics`` over loopback; HTTPS when its web config
turns TLS on, without verifying the certificate, since this only reads our own node's numbers),
or, with the web server off and textfile output on, from its ``npuwatch.prom``. No agent, or one
that asks for a password, is something this check cannot see: UNKNOWN, never PASS.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from agent.core.config import Config

__all__ = ["FAULT_REASONS", "AgentEndpoint", "AgentReading", "agent_endpoint", "read_agent"]

# npuwatch_collector_down_reason values that are faults (the others: no_data, no_inventory, not_run)
FAULT_REASONS = frozenset({"timeout", "exit", "parse", "missing_tool"})
_MAX_BYTES = 8 << 20
_TEXTFILE = "npuwatch.prom"


@dataclass
class AgentReading:
    where: str
    error: str | None = None  # why the agent could not be read
    up: dict[str, float] = field(default_factory=dict)  # collector -> npuwatch_collector_up
    reasons: dict[str, str] = field(default_factory=dict)  # collector -> down reason
    age_s: float | None = None  # textfile: seconds since it was written


def _host(address: str) -> str:
    if address in ("", "0.0.0.0", "::", "[::]"):  # noqa: S104 - a wildcard listener answers on loopback
        return "127.0.0.1"
    return f"[{address}]" if ":" in address and not address.startswith("[") else address


def _web_settings(path: str | None) -> tuple[bool, bool]:
    """(TLS on, basic auth on) from the agent's web config file."""
    if not path:
        return False, False
    from agent.core.config import ConfigError, read_yaml_file

    try:
        raw = read_yaml_file(path)
    except ConfigError:
        return False, False
    if not isinstance(raw, dict):
        return False, False
    return bool(raw.get("tls_server_config")), bool(raw.get("basic_auth_users"))


@dataclass(frozen=True)
class AgentEndpoint:
    """Where the local agent's exposition is: its ``/metrics`` URL, or the textfile it writes (``url`` None)."""

    url: str | None = None
    tls: bool = False  # https: our own node, so its certificate is not verified
    auth: bool = False  # it asks for a password
    textfile: Path | None = None
    textfile_interval_s: float = 0.0


def agent_endpoint(config: Config) -> AgentEndpoint | None:
    """The local agent's endpoint from its config; None when it serves nothing to read."""
    web = config.web
    if web.enabled:
        tls, auth = _web_settings(web.config_file)
        scheme = "https" if tls else "http"
        return AgentEndpoint(f"{scheme}://{_host(web.listen_address)}:{web.port}/metrics", tls, auth)
    if config.textfile.enabled:
        return AgentEndpoint(textfile=Path(config.textfile.directory) / _TEXTFILE,
                             textfile_interval_s=float(config.textfile.interval))
    return None


def read_agent(config: Config, timeout_s: float = 3.0) -> AgentReading:
    endpoint = agent_endpoint(config)
    if endpoint is None:
        return AgentReading("-", error="the agent serves nothing to read: web.enabled and textfile.enabled are false")
    if endpoint.url is not None:
        if endpoint.auth:
            return AgentReading(endpoint.url,
                                error="the agent asks for a password (basic_auth_users in its web config)")
        return _from_http(endpoint.url, endpoint.tls, timeout_s)
    assert endpoint.textfile is not None
    return _from_textfile(endpoint.textfile, endpoint.textfile_interval_s)


def _from_http(url: str, tls: bool, timeout_s: float) -> AgentReading:
    # Imported here: the agent's own judgement imports this module for AgentReading, and would carry the
    # HTTP client (urllib, http.client, email: about 1 MB) for a request it never makes.
    import http.client
    import ssl
    import urllib.error
    import urllib.request

    from agent.core.http_client import connection_problem

    context = None
    if tls:
        context = ssl.create_default_context()
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    try:
        with urllib.request.urlopen(url, timeout=timeout_s, context=context) as response:  # noqa: S310
            body = response.read(_MAX_BYTES).decode("utf-8", "replace")
    except urllib.error.HTTPError as exc:
        return AgentReading(url, error=f"{url} {connection_problem(exc)}")
    except (OSError, http.client.HTTPException) as exc:
        return AgentReading(url, error=f"no agent answers on {url}: {connection_problem(exc)}")
    return _parse(AgentReading(url), body)


def _from_textfile(path: Path, interval_s: float) -> AgentReading:
    try:
        stat = path.stat()
        with path.open("rb") as handle:
            body = handle.read(_MAX_BYTES).decode("utf-8", "replace")
    except OSError as exc:
        return AgentReading(str(path), error=f"{path}: {exc.strerror or exc}")
    reading = _parse(AgentReading(str(path)), body)
    reading.age_s = max(0.0, time.time() - stat.st_mtime)
    if reading.error is None and reading.age_s > 3 * interval_s:
        reading.error = f"{path} was last written {reading.age_s:.0f}s ago (textfile.interval {interval_s:g}s)"
    return reading


def _parse(reading: AgentReading, body: str) -> AgentReading:
    from prometheus_client.parser import text_string_to_metric_families

    try:
        for family in text_string_to_metric_families(body):
            for sample in family.samples:
                collector = sample.labels.get("collector")
                if collector is None:
                    continue
                if sample.name == "npuwatch_collector_up":
                    reading.up[collector] = sample.value
                elif sample.name == "npuwatch_collector_down_reason" and sample.value == 1:
                    reading.reasons[collector] = sample.labels.get("reason", "")
    except ValueError as exc:
        reading.error = f"{reading.where}: unreadable exposition: {exc}"
        return reading
    if not reading.up:
        reading.error = f"{reading.where}: no npuwatch_collector_up series (not an npuwatch agent?)"
    return reading
