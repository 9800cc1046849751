"""How a config section declares its settings, and how a raw YAML mapping becomes a section.

A section is a frozen dataclass whose fields are made by ``setting`` (a leaf: checker, default, the
one line of docs/configuration.md), ``derived`` (a leaf whose value is completed after checking, e.g.
from the environment) or ``section`` (a nested section). ``setting`` is typed so that the checker's
result, the default and the field's annotation must agree: mypy refuses ``interval: int =
setting(positive_duration, 10.0, ...)``. ``build_section`` checks a raw mapping against a section class
and collects every problem with its dotted path; ``schema_of`` gives the nested mapping the
generated reference walks.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, NamedTuple, TypeVar

from agent.core.config_values import Checker, clip, show

__all__ = ["ConfigSection", "Setting", "build_section", "derived", "schema_of", "section", "setting"]

T = TypeVar("T")
R = TypeVar("R")
S = TypeVar("S", bound="ConfigSection")

_SETTING = "npuwatch.setting"
_SECTION = "npuwatch.section"


class Setting(NamedTuple):
    """One leaf: how its raw value is checked, its default as a config file would leave it, its doc line."""

    check: Checker[Any]
    default: Any
    doc: str
    derive: Callable[[Any], Any] | None = None  # completes the checked value (None: the value as checked)


@dataclass(frozen=True)
class _Nested:
    cls: type[ConfigSection]
    defaults: Mapping[str, Any]
    docs: Mapping[str, str]


def setting(check: Checker[T], default: T, doc: str) -> T:
    """A leaf whose value is ``check(raw)``, or ``default`` when the key is absent."""
    return field(default=default, metadata={_SETTING: Setting(check, default, doc)})


def derived(check: Checker[R], default: R, doc: str, derive: Callable[[R], T]) -> T:
    """A leaf checked like ``setting`` and then completed by ``derive`` (the reference shows ``default``)."""
    spec = Setting(check, default, doc, derive)
    return field(default_factory=lambda: _frozen(derive(default)),
                 metadata={_SETTING: spec})


def section(cls: type[S], *, defaults: Mapping[str, Any] | None = None, docs: Mapping[str, str] | None = None) -> S:
    """A nested section; ``defaults`` and ``docs`` replace those of some of its settings in this place."""
    nested = _Nested(cls, dict(defaults or {}), dict(docs or {}))
    for name in (*nested.defaults, *nested.docs):
        if name not in {f.name for f in dataclasses.fields(cls)}:
            raise TypeError(f"{cls.__name__} has no setting {name!r}")
    return field(default_factory=lambda: cls(**nested.defaults),
                 metadata={_SECTION: nested})


@dataclass(frozen=True)
class ConfigSection:
    """The base of every section: read-only attributes, compared by value."""

    def to_dict(self) -> dict[str, Any]:
        """Plain nested dicts (mappings thawed, tuples kept), e.g. for ``apply_overrides``."""
        return {f.name: _thawed(getattr(self, f.name)) for f in dataclasses.fields(self)}


def _thawed(value: Any) -> Any:
    if isinstance(value, ConfigSection):
        return value.to_dict()
    if isinstance(value, Mapping):
        return {k: _thawed(v) for k, v in value.items()}
    return value


def _frozen(value: Any) -> Any:
    """Mappings as read-only views, so a frozen section holds no dict anyone can change."""
    if isinstance(value, Mapping):
        return MappingProxyType({k: _frozen(v) for k, v in value.items()})
    return value


def build_section(cls: type[S], raw: Any, path: str, problems: list[str],
                  defaults: Mapping[str, Any] | None = None) -> S:
    """``cls`` from a raw mapping: every problem appended to ``problems`` (the default kept in its place)."""
    if raw is None:
        raw = {}
    if not isinstance(raw, dict):
        problems.append(f"{path or 'config'}: expected a mapping of settings, got {show(raw)}")
        raw = {}
    names = [f.name for f in dataclasses.fields(cls)]
    for key in raw:
        if key not in names:
            where = clip(f"{path}.{key}" if path else str(key), 80)
            problems.append(f"{where}: unknown setting (known here: {', '.join(sorted(names))})")
    values: dict[str, Any] = {}
    for f in dataclasses.fields(cls):
        where = f"{path}.{f.name}" if path else f.name
        if _SECTION in f.metadata:
            nested: _Nested = f.metadata[_SECTION]
            values[f.name] = build_section(nested.cls, raw.get(f.name), where, problems, nested.defaults)
            continue
        spec: Setting = f.metadata[_SETTING]
        value = (defaults or {}).get(f.name, spec.default)
        if f.name in raw:
            try:
                value = spec.check(raw[f.name])
            except TypeError as exc:
                problems.append(f"{where}: {exc}")
        if spec.derive is not None:
            value = spec.derive(value)
        values[f.name] = _frozen(value)
    return cls(**values)


def schema_of(cls: type[ConfigSection], defaults: Mapping[str, Any] | None = None,
              docs: Mapping[str, str] | None = None) -> dict[str, Any]:
    """The section as nested ``{key: Setting or {...}}``, in declaration order."""
    schema: dict[str, Any] = {}
    for f in dataclasses.fields(cls):
        if _SECTION in f.metadata:
            nested: _Nested = f.metadata[_SECTION]
            schema[f.name] = schema_of(nested.cls, nested.defaults, nested.docs)
            continue
        spec: Setting = f.metadata[_SETTING]
        if defaults and f.name in defaults:
            spec = spec._replace(default=defaults[f.name])
        if docs and f.name in docs:
            spec = spec._replace(doc=docs[f.name])
        schema[f.name] = spec
    return schema
