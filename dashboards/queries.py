"""Walk the PromQL in a dashboard JSON, substitute Grafana variables, and name the metrics used.

Used by the static dashboard tests and by the end-to-end test that runs every
panel query against a real Prometheus:

    for title, expr in iter_panel_queries(document):
        promql = substitute(expr, {"node": "demo-node"})
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from typing import Any

__all__ = [
    "DEFAULT_VARIABLES",
    "iter_panel_queries",
    "iter_panels",
    "iter_variable_queries",
    "metric_names",
    "selector_labels",
    "substitute",
]

# What Grafana would put in for its built-in variables, and "All" for ours.
DEFAULT_VARIABLES: dict[str, str] = {
    "__rate_interval": "1m",
    "__interval": "30s",
    "__interval_ms": "30000",
    "__range": "1h",
    "__range_s": "3600",
    "__range_ms": "3600000",
    "datasource": "prometheus",
    "job": "npuwatch",
    "cluster": ".*",
    "node": ".*",
    "npu": ".*",
}

# ${name}, ${name:format} or $name; the longest name wins, so $__range_s is not $__range + "_s".
_VARIABLE = re.compile(r"\$\{(?P<braced>\w+)(?::[^}]*)?\}|\$(?P<bare>\w+)")


def iter_panels(document: Mapping[str, Any]) -> Iterator[dict[str, Any]]:
    """Every panel, rows included, with the panels nested in collapsed rows after their row."""
    for panel in document.get("panels", []):
        yield panel
        yield from panel.get("panels", [])


def iter_panel_queries(document: Mapping[str, Any]) -> Iterator[tuple[str, str]]:
    """(panel title, PromQL expr) for every target of every panel, in layout order."""
    for panel in iter_panels(document):
        for target in panel.get("targets") or []:
            expr = target.get("expr")
            if expr:
                yield panel.get("title", ""), expr


def iter_variable_queries(document: Mapping[str, Any]) -> Iterator[tuple[str, str]]:
    """(variable name, query) for every query variable, e.g. ``label_values(npu_chips{...}, node)``."""
    for variable in document.get("templating", {}).get("list", []):
        if variable.get("type") == "query":
            query = variable.get("query")
            if isinstance(query, dict):
                query = query.get("query", "")
            if query:
                yield variable["name"], query


def substitute(expr: str, variables: Mapping[str, str] | None = None) -> str:
    """Replace ``$name``/``${name}``/``${name:fmt}`` with values from ``variables``, else the defaults.

    An unknown variable raises KeyError naming it, so a query can never reach
    Prometheus with a literal ``$`` left in it.
    """
    values = {**DEFAULT_VARIABLES, **(variables or {})}

    def replace(match: re.Match[str]) -> str:
        name = match.group("braced") or match.group("bare")
        if name not in values:
            raise KeyError(f"no value for Grafana variable ${name} in {expr!r}")
        return values[name]

    return _VARIABLE.sub(replace, expr)


_STRING = re.compile(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'')
_RANGE = re.compile(r"\[[^\]]*\]")
_SELECTOR_BODY = re.compile(r"\{[^}]*\}")
_GROUPING = re.compile(r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)")
_FUNCTION_CALL = re.compile(r"\b[a-zA-Z_]\w*\s*\(")
_IDENTIFIER = re.compile(r"(?<![\w.])[a-zA-Z_:][\w:]*")
_KEYWORDS = frozenset({"and", "or", "unless", "bool", "offset", "by", "without", "on", "ignoring",
                       "group_left", "group_right", "inf", "nan", "Inf", "NaN", "e"})
_SELECTOR = re.compile(r"(?P<metric>[a-zA-Z_:][\w:]*)\s*\{(?P<body>[^}]*)\}")
_MATCHER = re.compile(r"(?P<label>[a-zA-Z_]\w*)\s*(?:=~|!~|!=|=)\s*\"(?:[^\"\\]|\\.)*\"")


def metric_names(expr: str) -> set[str]:
    """The metric names a PromQL expression reads (functions, keywords, labels, variables removed)."""
    text = _VARIABLE.sub(" ", expr)
    text = _STRING.sub(" ", _SELECTOR_BODY.sub(" ", _RANGE.sub(" ", text)))
    text = _GROUPING.sub(" ", text)
    text = _FUNCTION_CALL.sub(" ", text)
    return {name for name in _IDENTIFIER.findall(text) if name not in _KEYWORDS}


def selector_labels(expr: str) -> set[tuple[str, str]]:
    """(metric, label) for every label matcher written inside ``metric{...}`` in the expression."""
    pairs = set()
    for selector in _SELECTOR.finditer(expr):
        for matcher in _MATCHER.finditer(selector.group("body")):
            pairs.add((selector.group("metric"), matcher.group("label")))
    return pairs
