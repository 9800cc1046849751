"""A node's effective config in its bundle (``config.json``), and the limits triage judges that node's readings with.

``config_document(config)`` is what ``npuwatch bundle`` saves: every setting as the agent would run with it
(``Config.to_dict``), secrets redacted: a value whose key names a password, token, secret, credential, auth
or key (a TLS key), and the user and password of a URL (``https://user:pw@host``). A ``*_file`` setting is a
path and stays: the web config file that holds TLS and basic auth is named, its content never read.

``NodeLimits.from_document(document)`` reads back what triage needs to judge as ``check`` judged on that node:
``expected_chips``, ``check.max_temperature`` and ``check.max_isolated_pages`` (each with the words its
evidence cites). A document it cannot read gives the table's limits and a problem to report.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from agent.core.config_values import ConfigError
from agent.health.thresholds import fault_kind

if TYPE_CHECKING:
    from agent.core.config import Config

__all__ = ["CONFIG_MEMBER", "REDACTED", "NodeLimits", "config_document", "redacted"]

CONFIG_MEMBER = "config.json"
REDACTED = "<redacted>"
_SECRET_KEY = re.compile(r"pass(word|wd)?|secret|token|credential|auth|(^|_)key($|_)", re.I)
_URL_USER = re.compile(r"^([a-z][a-z0-9+.-]*://)[^/@\s]*@", re.I)


def redacted(value: Any, key: str = "") -> Any:
    """``value`` with every secret replaced by ``REDACTED`` (see the module docstring)."""
    if value is not None and _SECRET_KEY.search(key) and not key.endswith("_file"):
        return REDACTED  # a whole mapping too (basic_auth_users)
    if isinstance(value, Mapping):
        return {str(k): redacted(v, str(k)) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [redacted(item, key) for item in value]
    if isinstance(value, str):
        return _URL_USER.sub(lambda match: match.group(1) + REDACTED + "@", value)
    return value


def config_document(config: Config) -> bytes:
    """The effective config as the bundle's ``config.json``, secrets redacted."""
    return json.dumps({"npuwatch_config": redacted(config.to_dict())}, indent=1, sort_keys=True,
                      default=str).encode()


@dataclass(frozen=True)
class NodeLimits:
    """What triage's judgement of one node's saved readings takes from its config (default: the table's)."""

    expected_chips: int = 0
    max_temperature: float = float(fault_kind("chip_too_hot").threshold or 0.0)
    max_temperature_basis: str | None = None
    max_isolated_pages: int = int(fault_kind("hbm_pages_over").threshold or 0)
    max_isolated_pages_basis: str | None = None

    @classmethod
    def from_document(cls, body: bytes) -> NodeLimits:
        """The limits of a bundle's ``config.json``; ``ValueError`` for one that is not such a document."""
        from agent.core.config import build_config

        document = json.loads(body)
        saved = document.get("npuwatch_config") if isinstance(document, dict) else None
        if not isinstance(saved, dict):
            raise ValueError("not an npuwatch config document")
        check = saved.get("check")
        if not isinstance(check, dict):
            check = {}
        wanted = {key: check[key] for key in ("max_temperature", "max_isolated_pages") if check.get(key) is not None}
        try:
            config = build_config({"expected_chips": saved.get("expected_chips", 0), "check": wanted},
                                  "the bundle's config.json")
        except ConfigError as exc:
            raise ValueError(str(exc)) from None
        hot, pages = config.check.max_temperature, config.check.max_isolated_pages
        default = cls()
        return cls(expected_chips=int(config.expected_chips),
                   max_temperature=float(hot) if hot is not None else default.max_temperature,
                   max_temperature_basis="config check.max_temperature" if hot is not None else None,
                   max_isolated_pages=int(pages) if pages is not None else default.max_isolated_pages,
                   max_isolated_pages_basis="config check.max_isolated_pages" if pages is not None else None)
