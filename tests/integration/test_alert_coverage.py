"""The promtool cases in alerts/tests/ must bite: every part of every rule is exercised.

Three kinds of rule parts are found by reading the PromQL of alerts/*.rules.yml:

- every alternative of a label regex (``category=~"exec_timeout|connect_timeout"``),
- every operand of an ``or`` (at any depth),
- every threshold: a comparison with a number (``> 10``, ``>= 0.8``, ``> 3 * 3600``).

A static check requires each regex alternative to appear as that label's value in an input
series of a case testing the rule's alert. Then each part is changed ("mutated") in a copy of
its rule file: an alternative or an ``or`` operand is dropped, a threshold is moved just above
and just below its value. ``promtool test rules`` must fail for every such copy; a change that
still passes means no case depends on that part, i.e. no case sits just inside and just outside
the threshold, or none needs the branch.
"""

from __future__ import annotations

import copy
import functools
import re
import subprocess
import tempfile
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.support.hold_cases import CONDITION_PREFIX
from tests.support.paths import REPO

ALERTS_DIR = REPO / "alerts"
RULE_FILES = sorted(ALERTS_DIR.glob("*.rules.yml"))
PROMTOOL_TIMEOUT_S = 300

# ----------------------------------------------------------------------------- PromQL text

_LEXEME = re.compile(
    r"""(?P<string>"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'|`[^`]*`)
      |(?P<comment>\#[^\n]*)
      |(?P<range>\[[^\]]*\])
      |(?P<number>(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?(?![A-Za-z_:]))
      |(?P<word>[A-Za-z_:][A-Za-z0-9_:]*|\d+[A-Za-z]+)
      |(?P<op>==|!=|>=|<=|=~|!~|[-+*/%^<>=,(){}])
      |(?P<space>\s+)
    """,
    re.X,
)
COMPARISONS = frozenset({"==", "!=", ">=", "<=", ">", "<"})


@dataclass(frozen=True)
class Token:
    kind: str  # string, number, word, op, matchers ({...} as one token)
    text: str
    start: int
    end: int


def tokens(expr: str) -> list[Token]:
    """PromQL lexemes without spaces and comments; a ``{...}`` label matcher list is one token."""
    out: list[Token] = []
    position = 0
    brace_start: int | None = None
    while position < len(expr):
        match = _LEXEME.match(expr, position)
        if match is None:
            raise ValueError(f"cannot read PromQL at {expr[position:position + 30]!r}")
        kind = match.lastgroup or ""
        text = match.group()
        position = match.end()
        if brace_start is not None:
            if text == "}":
                out.append(Token("matchers", expr[brace_start:position], brace_start, position))
                brace_start = None
            continue
        if text == "{":
            brace_start = match.start()
        elif kind not in ("space", "comment"):
            out.append(Token(kind, text, match.start(), match.end()))
    if brace_start is not None:
        raise ValueError("unclosed {")
    return out


@dataclass(frozen=True)
class OrOperand:
    """One operand of an ``or`` chain and the text span that removing it takes out."""

    text: str
    removal: tuple[int, int]


def or_operands(expr: str) -> list[OrOperand]:
    """Every operand of every ``or`` chain, at any parenthesis depth."""
    toks = tokens(expr)
    # group of each token: index of its enclosing "(" token, -1 at the top
    stack = [-1]
    groups: dict[int, list[int]] = {}  # group -> indexes of its "or" tokens
    closers: dict[int, int] = {}  # group -> index of its ")"
    for index, tok in enumerate(toks):
        if tok.text == "(":
            stack.append(index)
        elif tok.text == ")":
            closers[stack.pop()] = index
        elif tok.kind == "word" and tok.text == "or":
            groups.setdefault(stack[-1], []).append(index)
    found: list[OrOperand] = []
    for group, ors in groups.items():
        first = group + 1  # first token of the group's content (0 at the top)
        last = closers.get(group, len(toks)) - 1 if group >= 0 else len(toks) - 1
        # each "or" with its modifier, e.g. "or on (job, instance)": (first index, last index)
        operators = []
        for index in ors:
            end = index
            if end + 1 <= last and toks[end + 1].text in ("on", "ignoring"):
                end += 2  # the modifier word and its "("
                depth = 1
                while depth:
                    end += 1
                    depth += {"(": 1, ")": -1}.get(toks[end].text, 0)
            operators.append((index, end))
        bounds = [first] + [end + 1 for _, end in operators]
        ends = [start - 1 for start, _ in operators] + [last]
        for number, lo in enumerate(bounds):
            hi = ends[number]
            text = expr[toks[lo].start:toks[hi].end]
            if number == 0:
                removal = (toks[lo].start, toks[bounds[1]].start)
            else:
                removal = (toks[operators[number - 1][0]].start, toks[hi].end)
            found.append(OrOperand(" ".join(text.split()), removal))
    return found


_REGEX_MATCHER = re.compile(r'(?P<label>[A-Za-z_]\w*)\s*=~\s*"(?P<value>(?:[^"\\]|\\.)*)"')


def split_alternatives(regex: str) -> list[str]:
    """Top-level ``|`` alternatives of a regex (not inside groups or classes)."""
    parts, depth, current, escaped = [], 0, "", False
    for char in regex:
        if escaped:
            current, escaped = current + char, False
            continue
        if char == "\\":
            current, escaped = current + char, True
            continue
        if char in "([":
            depth += 1
        elif char in ")]":
            depth -= 1
        if char == "|" and depth == 0:
            parts.append(current)
            current = ""
        else:
            current += char
    return [*parts, current]


def regex_alternations(expr: str) -> dict[tuple[str, str], list[str]]:
    """``{(label, regex): alternatives}`` of every ``label=~"a|b"`` matcher with 2+ alternatives."""
    found: dict[tuple[str, str], list[str]] = {}
    for tok in tokens(expr):
        if tok.kind != "matchers":
            continue
        for match in _REGEX_MATCHER.finditer(tok.text):
            alternatives = split_alternatives(match.group("value"))
            if len(alternatives) > 1:
                found[(match.group("label"), match.group("value"))] = alternatives
    return found


@dataclass(frozen=True)
class Threshold:
    """``op number`` in an expression; ``value`` is the number (products evaluated)."""

    op: str
    text: str
    value: float
    span: tuple[int, int]


def thresholds(expr: str) -> list[Threshold]:
    """Comparisons of a series with a number literal (``x > 10``, ``x > 3 * 3600``)."""
    toks = tokens(expr)
    found = []
    for index, tok in enumerate(toks):
        if tok.text not in COMPARISONS:
            continue
        at = index + 1
        if at < len(toks) and toks[at].text == "bool":
            at += 1
        if at >= len(toks) or toks[at].kind != "number":
            continue
        end = at
        value = float(toks[at].text)
        while end + 2 < len(toks) and toks[end + 1].text == "*" and toks[end + 2].kind == "number":
            value *= float(toks[end + 2].text)
            end += 2
        span = (toks[at].start, toks[end].end)
        found.append(Threshold(tok.text, expr[span[0]:span[1]], value, span))
    return found


def nudged(threshold: Threshold) -> tuple[str, str]:
    """The threshold moved just below and just above: by 300 for seconds (``3 * 3600``: one step
    of the 5-minute evaluations in probes-long-test.yml), by 1 for small whole numbers (counts,
    0/1 states, °C), else by 2 %."""
    value = threshold.value
    if "*" in threshold.text:
        step = 300.0
    elif value.is_integer() and abs(value) < 1000:
        step = 1.0
    else:
        step = abs(value) * 0.02
    return repr(value - step), repr(value + step)


# ----------------------------------------------------------------------------- rules and cases


@dataclass(frozen=True)
class Rule:
    area: str
    index: int  # position in the file, over all groups
    name: str  # alert name or recorded series
    is_alert: bool
    labels: tuple[tuple[str, str], ...]
    expr: str

    @property
    def title(self) -> str:
        variant = ",".join(f"{k}={v}" for k, v in self.labels)
        return f"{self.area}:{self.name}{{{variant}}}"


_Loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_Dumper = getattr(yaml, "CSafeDumper", yaml.SafeDumper)


@functools.cache
def _load(path: Path) -> dict[str, Any]:
    """A parsed YAML file, read once; callers copy before changing it."""
    with path.open(encoding="utf-8") as handle:
        data = yaml.load(handle, Loader=_Loader)  # a safe loader (C or Python)
    assert isinstance(data, dict), path
    return data


def _dump(document: dict[str, Any], path: Path) -> None:
    path.write_text(yaml.dump(document, Dumper=_Dumper, sort_keys=False, allow_unicode=True), encoding="utf-8")


def _rule_dicts(document: dict[str, Any]) -> Iterator[dict[str, Any]]:
    for group in document["groups"]:
        yield from group["rules"]


def rules() -> list[Rule]:
    found = []
    for path in RULE_FILES:
        area = path.name.removesuffix(".rules.yml")
        for index, rule in enumerate(_rule_dicts(_load(path))):
            labels = tuple(sorted((rule.get("labels") or {}).items()))
            found.append(Rule(area, index, rule.get("alert") or rule["record"], "alert" in rule,
                              labels, rule["expr"]))
    return found


def files_testing(area: str) -> list[Path]:
    """The promtool test files that load ``alerts/<area>.rules.yml``."""
    return [path for path in sorted((ALERTS_DIR / "tests").glob("*-test.yml"))
            if f"../{area}.rules.yml" in _load(path).get("rule_files", [])]


def served_alert(rule: Rule) -> str | None:
    """The alert ``rule`` is, or whose condition it records (``npuwatch:alert_condition:<alert>``, read by
    that alert alone); None for a recording rule that feeds several."""
    if rule.is_alert:
        return rule.name
    if rule.name.startswith(CONDITION_PREFIX):
        return rule.name[len(CONDITION_PREFIX):]
    return None


def _checks_alert(check: dict[str, Any], alert: str) -> bool:
    """An alert_rule_test of ``alert``, or a promql_expr_test of its ALERTS series (the hold cases)."""
    return check.get("alertname") == alert or f'alertname="{alert}"' in str(check.get("expr", ""))


def cases_by_file(rule: Rule) -> dict[Path, list[dict[str, Any]]]:
    """The cases that can notice a change of ``rule``, by test file: those testing its alert (or the
    alert whose condition it records), or every case for another recording rule (its series feed
    alerts and promql_expr_test)."""
    alert = served_alert(rule)
    # A file over several areas (hold-test.yml) runs with the mutated area's file alone: only its
    # cases of this area's alerts apply.
    wanted = {alert} if alert is not None else {r.name for r in rules() if r.area == rule.area and r.is_alert}
    if alert is None and rule.area.endswith("-shard"):
        # a per-node half records for the alerts of the files tested with it (its fleet half)
        together = {Path(name).name.removesuffix(".rules.yml") for path in files_testing(rule.area)
                    for name in _load(path).get("rule_files", [])}
        wanted = {r.name for r in rules() if r.area in together and r.is_alert}
    found: dict[Path, list[dict[str, Any]]] = {}
    for path in files_testing(rule.area):
        shared = len(_load(path).get("rule_files", [])) > 1
        cases = [case for case in _load(path)["tests"]
                 if (alert is None and not shared)
                 or any(_checks_alert(check, name) for name in wanted
                        for check in case.get("alert_rule_test", []) + case.get("promql_expr_test", []))]
        if cases:
            found[path] = cases
    return found


def cases_for(rule: Rule) -> list[dict[str, Any]]:
    return [case for cases in cases_by_file(rule).values() for case in cases]


_SERIES_LABEL = re.compile(r'([A-Za-z_]\w*)\s*=\s*"((?:[^"\\]|\\.)*)"')


def input_label_values(cases: list[dict[str, Any]]) -> set[tuple[str, str]]:
    values: set[tuple[str, str]] = set()
    for case in cases:
        for series in case.get("input_series", []):
            values.update(_SERIES_LABEL.findall(series["series"]))
    return values


# ----------------------------------------------------------------------------- mutants


@dataclass(frozen=True)
class Mutant:
    rule: Rule
    change: str  # what was changed, for the failure message
    expr: str


def mutants(rule: Rule) -> list[Mutant]:
    out = []
    for (label, regex), alternatives in regex_alternations(rule.expr).items():
        for dropped in alternatives:
            kept = "|".join(a for a in alternatives if a != dropped)
            expr = rule.expr.replace(f'{label}=~"{regex}"', f'{label}=~"{kept}"')
            out.append(Mutant(rule, f"{label}=~ without {dropped!r}", expr))
    for operand in or_operands(rule.expr):
        lo, hi = operand.removal
        out.append(Mutant(rule, f"without the or-operand `{operand.text}`", rule.expr[:lo] + rule.expr[hi:]))
    for threshold in thresholds(rule.expr):
        lo, hi = threshold.span
        for moved in nudged(threshold):
            out.append(Mutant(rule, f"{threshold.op} {threshold.text} moved to {moved}",
                              rule.expr[:lo] + moved + rule.expr[hi:]))
    return out


_DURATION_PART = re.compile(r"(\d+)(ms|[smhdwy])")
_SECONDS = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800, "y": 31536000}


def seconds(duration: str) -> float:
    """A Prometheus duration (``1h16m``, ``90m``, ``0m``) in seconds."""
    parts = _DURATION_PART.findall(str(duration))
    assert "".join(n + u for n, u in parts) == str(duration), duration
    return sum(int(n) * _SECONDS[u] for n, u in parts)


@dataclass(frozen=True)
class CaseRun:
    """One promtool case of one test file, and its cost in rule-group evaluations."""

    source: Path
    case: dict[str, Any]
    evaluations: float


def case_runs(rule: Rule) -> list[CaseRun]:
    """The cases that can notice a change of ``rule``, cheapest first. For an alert, only its own
    alert checks are kept (the mutant's rule file keeps no other alert)."""
    runs = []
    for path, cases in cases_by_file(rule).items():
        interval = seconds(_load(path).get("evaluation_interval", "1m"))
        for case in cases:
            if rule.is_alert:
                case = {**case, **{kind: [c for c in case.get(kind, []) if _checks_alert(c, rule.name)]
                                   for kind in ("alert_rule_test", "promql_expr_test")}}
                case = {k: v for k, v in case.items() if v}
            last = max([seconds(c["eval_time"]) for c in case.get("alert_rule_test", [])]
                       + [seconds(c["eval_time"]) for c in case.get("promql_expr_test", [])])
            runs.append(CaseRun(path, case, last / interval))
    return sorted(runs, key=lambda run: run.evaluations)


def _write_rules(root: Path, number: int, mutant: Mutant) -> Path:
    """The mutated rule file in ``<root>/m<number>/alerts/``: for an alert, the recording rules
    and that alert's rules only (fewer rules to evaluate), else the whole file."""
    base = root / f"m{number:03d}" / "alerts"
    (base / "tests").mkdir(parents=True)
    source = ALERTS_DIR / f"{mutant.rule.area}.rules.yml"
    document = copy.deepcopy(_load(source))
    index = 0
    for group in document["groups"]:
        kept = []
        for rule in group["rules"]:
            if index == mutant.rule.index:
                assert rule.get("alert", rule.get("record")) == mutant.rule.name
                rule["expr"] = mutant.expr
            if not mutant.rule.is_alert or "record" in rule or rule["alert"] == mutant.rule.name:
                kept.append(rule)
            index += 1
        group["rules"] = kept
    target = base / source.name
    _dump(document, target)
    return target


def _write_case(rules_path: Path, attempt: int, run: CaseRun) -> Path:
    """The case against the mutated file, with the test file's other rule files as they are when the
    mutated file is one half of a rule chain (``<area>-shard.rules.yml`` and its fleet half)."""
    source = _load(run.source)
    halves = {f"../{name}" for name in source.get("rule_files", []) if "-shard." in name}
    others = [str((run.source.parent / name).resolve()) for name in source.get("rule_files", [])
              if halves and Path(name).name != rules_path.name]
    document = {**source, "rule_files": [f"../{rules_path.name}", *others], "tests": [run.case]}
    target = rules_path.parent / "tests" / f"attempt{attempt:02d}-{run.source.name}"
    _dump(document, target)
    return target


def _promtool_results(promtool: str, files: list[Path]) -> dict[str, bool]:
    """``{test file: passed}`` from one ``promtool test rules`` run over several files."""
    if not files:
        return {}
    result = subprocess.run([promtool, "test", "rules", *map(str, files)], capture_output=True,
                            text=True, timeout=PROMTOOL_TIMEOUT_S, check=False)
    output = result.stdout + result.stderr
    passed: dict[str, bool] = {}
    for block in output.split("Unit Testing:")[1:]:
        name, _, rest = block.strip().partition("\n")
        passed[name.strip()] = rest.strip().startswith("SUCCESS")
    missing = {str(f) for f in files} - set(passed)
    assert not missing, f"promtool said nothing about {sorted(missing)}:\n{output[-3000:]}"
    return passed


def surviving_mutants(promtool: str, all_mutants: list[Mutant], root: Path) -> list[Mutant]:
    """The mutants every case still passes. Cases run in rounds, cheapest first, one case per
    mutant per round, and a mutant leaves as soon as a case fails: most fail in round one."""
    rule_paths = [_write_rules(root, number, mutant) for number, mutant in enumerate(all_mutants)]
    checked = subprocess.run([promtool, "check", "rules", *map(str, rule_paths)], capture_output=True,
                             text=True, timeout=PROMTOOL_TIMEOUT_S, check=False)
    assert checked.returncode == 0, "a mutant is not valid PromQL:\n" + checked.stdout[-3000:] + checked.stderr
    pending = {number: case_runs(mutant.rule) for number, mutant in enumerate(all_mutants)}
    alive = set(pending)
    attempt = 0
    with ThreadPoolExecutor(max_workers=2) as pool:  # two promtool processes: two cores
        while any(pending[number] for number in alive):
            files = {number: _write_case(rule_paths[number], attempt, pending[number].pop(0))
                     for number in sorted(alive) if pending[number]}
            listed = list(files.values())
            passed: dict[str, bool] = {}
            for part in pool.map(lambda chunk: _promtool_results(promtool, chunk), [listed[0::2], listed[1::2]]):
                passed.update(part)
            alive -= {number for number, path in files.items() if not passed[str(path)]}
            attempt += 1
    return [all_mutants[number] for number in sorted(alive)]



# ----------------------------------------------------------------------------- tests


def test_promql_reading() -> None:
    expr = (
        'a{x=~"p|q"} > 0 unless b offset 5m\n'
        "  # or c\n"
        "or on (job, instance) (d or e{y=~\"(r|s)t|u\"}) * on (job) group_left (node) f\n"
        "or time() - g > 3 * 3600"
    )
    assert [t.text for t in tokens("x{a=\"}\"} >= 1e9")] == ["x", '{a="}"}', ">=", "1e9"]
    assert regex_alternations(expr) == {("x", "p|q"): ["p", "q"], ("y", "(r|s)t|u"): ["(r|s)t", "u"]}
    operands = {o.text: expr[:o.removal[0]] + expr[o.removal[1]:] for o in or_operands(expr)}
    assert set(operands) == {
        'a{x=~"p|q"} > 0 unless b offset 5m',
        '(d or e{y=~"(r|s)t|u"}) * on (job) group_left (node) f',
        "time() - g > 3 * 3600",
        "d",
        'e{y=~"(r|s)t|u"}',
    }
    assert " ".join(operands["d"].split()) == (
        'a{x=~"p|q"} > 0 unless b offset 5m # or c or on (job, instance) (e{y=~"(r|s)t|u"}) '
        "* on (job) group_left (node) f or time() - g > 3 * 3600"
    )
    assert " ".join(operands['a{x=~"p|q"} > 0 unless b offset 5m'].split()).startswith("(d or e")
    assert [(t.op, t.text, t.value) for t in thresholds(expr)] == [(">", "0", 0.0), (">", "3 * 3600", 10800.0)]
    assert nudged(thresholds("x > 3 * 3600")[0]) == ("10500.0", "11100.0")
    assert nudged(thresholds("x > 10")[0]) == ("9.0", "11.0")
    assert nudged(thresholds("x < 0.8")[0]) == (repr(0.8 - 0.016), repr(0.8 + 0.016))


def test_rules_have_parts_to_check() -> None:
    """The readers find what is there (guards against a reader that silently finds nothing)."""
    # an alert held through scrape gaps reads its condition from the record just before it
    by_name = {served_alert(rule): rule for rule in rules() if not rule.is_alert and served_alert(rule)}
    timeout = regex_alternations(by_name["HCCLTimeout"].expr)
    assert {tuple(alts) for alts in timeout.values()} == {
        ("exec_timeout", "connect_timeout", "rendezvous_timeout", "watchdog_timeout")
    }
    assert len(or_operands(by_name["HCCLTimeout"].expr)) == 6  # 4 branches + the 2-way log guard
    assert [t.value for t in thresholds(by_name["NPUHBMSingleBitECCRate"].expr)] == [10.0]


@pytest.mark.parametrize("rule", [pytest.param(r, id=r.title) for r in rules()])
def test_every_regex_alternative_is_in_a_case(rule: Rule) -> None:
    """Each alternative of ``label=~"a|b|c"`` is the value of ``label`` in some input series of a
    case testing this rule, so a new alternative without its own case fails here."""
    present = input_label_values(cases_for(rule))
    missing = [
        f'{label}="{alternative}"'
        for (label, _regex), alternatives in regex_alternations(rule.expr).items()
        for alternative in alternatives
        if (label, alternative) not in present
    ]
    assert not missing, f"{rule.title}: no case has an input series with {missing}"


def test_every_rule_part_is_needed_by_a_case(promtool: str) -> None:
    """Dropping a regex alternative or an ``or`` operand, or moving a threshold, fails promtool."""
    all_mutants = [mutant for rule in rules() for mutant in mutants(rule)]
    assert len(all_mutants) > 100, len(all_mutants)
    with tempfile.TemporaryDirectory(prefix="npuwatch-mutants-") as tmp:
        survivors = surviving_mutants(promtool, all_mutants, Path(tmp))
    assert not survivors, (
        "promtool tests still pass with these rule changes; add cases that need the part "
        "(just inside and just outside a threshold, one per alternative and branch):\n  "
        + "\n  ".join(f"{m.rule.title}: {m.change}" for m in survivors)
    )
