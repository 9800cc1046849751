"""The fail-slow rules (alerts/failslow.rules.yml) filled in from their template and the fault registry's limits.

The expressions and their comments are written by hand in ``failslow.rules.in.yml``; each number they hold a job's
ranks to is a ``<<name>>`` placeholder naming a field of ``FailSlowLimits`` (``agent.health.failslow_limits``, the
``fleet_limits`` of the registry's ``job_straggler``), and ``<<hold>>`` is the hold of every alert. ``<<...>>``
cannot be PromQL, a Go template (``{{ }}``) or a YAML merge key inside an expression. A placeholder that names
nothing, a limit no placeholder uses, or a ``<<`` / ``>>`` left over is an error, with its line. Lines of the
template that start with ``#!`` are its own notes and are left out. ``alerts.generate`` writes the file.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import fields
from pathlib import Path

from agent.core.config_values import format_duration
from agent.health.failslow_limits import FailSlowLimits, duration_fields
from agent.health.thresholds import fault_kind

__all__ = ["HOLD", "KIND", "RULES", "TEMPLATE", "duration", "fill", "number", "registry_limits", "render", "values"]

HERE = Path(__file__).resolve().parent
TEMPLATE = HERE / "failslow.rules.in.yml"
RULES = HERE / "failslow.rules.yml"
KIND = "job_straggler"
HOLD = "hold"  # the placeholder of the alerts' hold, which is not a fail-slow limit
NOTE = "#!"
_PLACEHOLDER = re.compile(r"<<([^<>\n]*)>>")
_NAME = re.compile(r"[a-z][a-z0-9_]*")


def registry_limits() -> FailSlowLimits:
    """The limits of the fault registry's ``job_straggler`` entry."""
    limits = fault_kind(KIND).fleet_limits
    if limits is None:
        raise ValueError(f"the fault registry's {KIND} has no fleet_limits")
    return limits


def number(value: float) -> str:
    """``value`` as PromQL reads it, as a person writes it: 4, 0.04, 1e6, 2.5e6, 1e-5."""
    if isinstance(value, bool) or not math.isfinite(value):
        raise ValueError(f"{value!r} is not a finite number")
    if float(value).is_integer():
        digits = str(abs(int(value)))
        if len(digits) <= 6:
            return str(int(value))
        significant = digits.rstrip("0")
        mantissa = significant[0] + (f".{significant[1:]}" if len(significant) > 1 else "")
        return f"{'-' if value < 0 else ''}{mantissa}e{len(digits) - 1}"
    text = repr(float(value))
    if "e" in text:
        mantissa, _, exponent = text.partition("e")
        return f"{mantissa}e{int(exponent)}"
    return text


def duration(seconds: float) -> str:
    """A whole number of seconds as a Prometheus duration: 30s, 10m, 1h."""
    whole = int(seconds)
    if whole != seconds or whole < 0:
        raise ValueError(f"{seconds!r} s is not a whole number of seconds")
    return format_duration(whole)


def values(limits: FailSlowLimits, hold: str) -> dict[str, str]:
    """Each placeholder's text: the limits' fields (durations as durations) and the hold."""
    seconds = duration_fields()
    out = {item.name: (duration if item.name in seconds else number)(getattr(limits, item.name))
           for item in fields(limits)}
    out[HOLD] = hold
    return out


def fill(template: str, texts: Mapping[str, str]) -> str:
    """``template`` without its notes, each ``<<name>>`` replaced by ``texts[name]``; every name used."""
    out: list[str] = []
    used: set[str] = set()
    errors: list[str] = []
    for number_, line in enumerate(template.splitlines(keepends=True), start=1):
        if line.startswith(NOTE):
            continue
        for name in _PLACEHOLDER.findall(line):
            if not _NAME.fullmatch(name):
                errors.append(f"line {number_}: <<{name}>> is not a placeholder name (lower case, digits, _)")
            elif name not in texts:
                errors.append(f"line {number_}: unknown placeholder <<{name}>> (not a field of FailSlowLimits "
                              f"nor <<{HOLD}>>)")
            used.add(name)
        filled = _PLACEHOLDER.sub(lambda found: texts.get(found.group(1), found.group(0)), line)
        if not errors and ("<<" in filled or ">>" in filled):
            errors.append(f"line {number_}: a << or >> outside a placeholder: {line.strip()}")
        out.append(filled)
    unused = sorted(set(texts) - used)
    if unused:
        errors.append(f"no placeholder uses {', '.join(unused)}: every limit must reach the rules")
    if errors:
        raise ValueError("failslow rules template: " + "; ".join(errors))
    return "".join(out)


def render(limits: FailSlowLimits | None = None, *, hold: str, template: str | None = None) -> str:
    """The rules of ``template`` (default: failslow.rules.in.yml) with ``limits`` (default: the registry's)."""
    text = TEMPLATE.read_text(encoding="utf-8") if template is None else template
    return fill(text, values(registry_limits() if limits is None else limits, hold))
