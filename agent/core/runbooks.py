"""Where the alert runbooks are published: one base URL for the rules and for what the commands print.

The rule files (``alerts/*.rules.yml``) carry ``DEFAULT_RUNBOOK_BASE``, which tests/unit/test_alert_rules.py
holds them to. A fleet that hosts the runbooks elsewhere (a mirror, an internal wiki) sets
``NPUWATCH_RUNBOOK_BASE``: the commands' output (``diagnose``, ``scan-logs``) then links there, and
``deploy/kubernetes/generate.py`` writes the PrometheusRule with it (or takes ``--runbook-base``).
"""

from __future__ import annotations

import os
from collections.abc import Mapping

__all__ = ["DEFAULT_RUNBOOK_BASE", "RUNBOOK_BASE", "RUNBOOK_BASE_ENV", "rebase", "runbook_base", "runbook_url"]

DEFAULT_RUNBOOK_BASE = "https://github.com/npuwatch/npuwatch/blob/main/alerts/runbooks/"
RUNBOOK_BASE_ENV = "NPUWATCH_RUNBOOK_BASE"


def runbook_base(environ: Mapping[str, str] | None = None) -> str:
    """``$NPUWATCH_RUNBOOK_BASE`` (with a trailing slash), else the default."""
    value = (os.environ if environ is None else environ).get(RUNBOOK_BASE_ENV, "").strip()
    if not value:
        return DEFAULT_RUNBOOK_BASE
    return value if value.endswith("/") else value + "/"


RUNBOOK_BASE = runbook_base()  # this process's, decided once


def runbook_url(alert: str, base: str | None = None) -> str:
    """The runbook of ``alert`` (``NPURoCELinkDown``) or of a file name (``NPURoCELinkDown.md``), at a section when
    one follows a ``#`` (``NPUCheckFailed#gemm``)."""
    page, hash_, section = alert.partition("#")
    name = page if page.endswith(".md") else f"{page}.md"
    return (base or RUNBOOK_BASE) + name + hash_ + section


def rebase(url: str, base: str) -> str:
    """A rule's ``runbook_url`` moved from the default base to ``base``; any other URL unchanged."""
    if url.startswith(DEFAULT_RUNBOOK_BASE):
        return base + url[len(DEFAULT_RUNBOOK_BASE):]
    return url
