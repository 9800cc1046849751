"""Where ``npuwatch top`` reads the agent: ``--url`` (another node, with the client's TLS and basic auth), else the
local agent its config describes (``/metrics`` on its port, or the textfile it writes), the way ``check`` finds it.
A read that fails keeps the last good view and says why: the screen then shows the data's age, not a traceback."""

from __future__ import annotations

import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agent.check.local_agent import agent_endpoint
from agent.core.http_client import ClientTls, basic_auth_header, build_opener, check_url, read_password
from agent.top.model import Fetched, NodeView, parse_view, samples_of

if TYPE_CHECKING:
    from agent.core.config import Config

__all__ = ["PASSWORD_ENV", "AgentSource", "NoLocalAgent", "Reader", "source_from_args"]

PASSWORD_ENV = "NPUWATCH_AGENT_PASSWORD"  # noqa: S105 - the variable's name, not a password
_MAX_BYTES = 32 << 20


class NoLocalAgent(ValueError):
    """The config gives this node's agent nothing to serve (no web, no textfile)."""


@dataclass(frozen=True)
class AgentSource:
    url: str | None = None  # an agent's /metrics
    textfile: Path | None = None  # or the file an agent writes
    tls: ClientTls = field(default_factory=ClientTls)
    username: str | None = None
    password: str | None = None
    timeout_s: float = 5.0

    @property
    def where(self) -> str:
        return self.url or str(self.textfile)

    def read(self) -> str:
        """The exposition text; OSError (with a reason a person reads) when there is none."""
        if self.textfile is not None:
            with self.textfile.open("rb") as handle:
                return handle.read(_MAX_BYTES).decode("utf-8", "replace")
        assert self.url is not None
        opener = build_opener(self.url, self.tls)
        request = urllib.request.Request(self.url, headers=basic_auth_header(self.username, self.password))  # noqa: S310
        try:
            with opener.open(request, timeout=self.timeout_s) as response:
                return response.read(_MAX_BYTES).decode("utf-8", "replace")  # type: ignore[no-any-return]
        except urllib.error.HTTPError as exc:
            raise OSError(f"HTTP {exc.code} {exc.reason}{self._hint(exc.code)}") from None
        except urllib.error.URLError as exc:
            raise OSError(str(exc.reason)) from None

    def _hint(self, code: int) -> str:
        """What to do about an HTTP error the agent answered with (its web config asks for basic auth)."""
        if code != 401:
            return ""
        if self.username is None:
            return f": the agent asks for a password: give --user and --password-file (or ${PASSWORD_ENV})"
        return (f": the agent refused user {self.username!r} with that password: check --user and "
                f"--password-file (or ${PASSWORD_ENV})")


def source_from_args(args: Any, config: Config) -> AgentSource:
    """The source ``--url`` and its client flags name, else the local agent's; ValueError says what is wrong."""
    password = read_password(getattr(args, "password_file", None), "--password-file", PASSWORD_ENV,
                             getattr(args, "user", None))
    tls = ClientTls(ca_file=getattr(args, "ca_file", None), cert_file=getattr(args, "cert_file", None),
                    key_file=getattr(args, "key_file", None), insecure=bool(getattr(args, "insecure", False)))
    timeout = float(getattr(args, "timeout", 5.0))
    if getattr(args, "url", None):
        url = args.url if args.url.rstrip("/").endswith("/metrics") else args.url.rstrip("/") + "/metrics"
        check_url(url, "--url")
        return AgentSource(url=url, tls=tls, username=getattr(args, "user", None), password=password,
                           timeout_s=timeout)
    endpoint = agent_endpoint(config)
    if endpoint is None:
        raise NoLocalAgent("the agent serves nothing to read (web.enabled and textfile.enabled are false): "
                           "give --url")
    if endpoint.url is None:
        return AgentSource(textfile=endpoint.textfile, timeout_s=timeout)
    if endpoint.auth and getattr(args, "user", None) is None:
        raise ValueError(f"the agent at {endpoint.url} asks for a password: give --user and --password-file "
                         f"(or ${PASSWORD_ENV})")
    # Our own node's agent: its certificate names the node, not 127.0.0.1, so it is not verified.
    local_tls = ClientTls(ca_file=tls.ca_file, cert_file=tls.cert_file, key_file=tls.key_file,
                          insecure=tls.insecure or (endpoint.tls and tls.ca_file is None))
    return AgentSource(url=endpoint.url, tls=local_tls, username=getattr(args, "user", None), password=password,
                       timeout_s=timeout)


class Reader:
    """Reads the source at each refresh and keeps the last good view."""

    def __init__(self, source: AgentSource) -> None:
        self.source = source
        self._view: NodeView | None = None
        self._at: float | None = None

    def read(self) -> Fetched:
        try:
            view = parse_view(samples_of(self.source.read()))
        except (OSError, ValueError) as exc:
            return Fetched(self._view, self._at, str(exc) or type(exc).__name__, self.source.where)
        if not view.collectors:
            return Fetched(self._view, self._at, "no npuwatch_collector_up series: is this an npuwatch agent?",
                           self.source.where)
        self._view, self._at = view, time.time()
        return Fetched(view, self._at, None, self.source.where)
