"""Mutation testing of the modules that carry npuwatch's contracts: do the tests bite?

    python bench/mutation.py --list                 # module -> test files
    python bench/mutation.py --module bounds        # one module (a few minutes)
    python bench/mutation.py                        # every module, one after the other (long)
    python bench/mutation.py --module bounds --survivors   # plus each unexplained survivor
    python bench/mutation.py --report --survivors --explained   # the last runs again, no new run

A tool, not a CI gate: it is slow, and it needs ``mutmut`` (pinned in the ``test`` extra).
Each module runs in its own scratch copy of the tree (``build/mutation/<module>``, kept so that
``python -m mutmut show NAME`` / ``browse`` work there afterwards), with only that module's test
files selected; mutmut then runs, for each mutant, only the selected tests that reach the mutated
function, forking one process per mutant.

Everything the run needs is in this file (one place): the module -> tests table (``TARGETS``), the
mutmut settings (``_MUTMUT_SETTINGS``) and the verdicts on survivors that are not bugs in the tests
(``VERDICTS``). A verdict names the function and the changed line before and after the mutation, so
it survives renumbering of mutants and edits elsewhere in the module; a verdict whose line changed
no longer matches and the survivor shows up again, unexplained.

Table columns: mutants generated; killed (a selected test failed); timeout (the mutant hung or ran
15x slower: counted as caught); survived (all selected tests passed, or none reached it);
equivalent (a survivor that changes no observable behaviour); accepted (a survivor left on purpose,
with the reason in ``VERDICTS``); score = (killed + timeout) / (mutants - equivalent).
docs/mutation.md holds the last measured table and the survivors with their reasons.
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import difflib
import fnmatch
import json
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from mutation_verdicts import ACCEPTED, CASE_ONLY, CODEC_CASE, EQUIVALENT, VERDICTS, Verdict

ROOT = Path(__file__).resolve().parents[1]
WORK_ROOT = ROOT / "build" / "mutation"
TARGET_SCORE = 85.0

# mutmut's exit-code meanings (mutmut/stats.py), folded into the table's columns.
KILLED, TIMEOUT, SURVIVED = "killed", "timeout", "survived"
# 255 is a worker that could not run its tests (mutmut files it under timeout): not caught.
_STATUS_BY_EXIT_CODE = {1: KILLED, 3: KILLED, 37: KILLED, 0: SURVIVED, 5: SURVIVED, 33: SURVIVED,
                        36: TIMEOUT, 24: TIMEOUT, -24: TIMEOUT, 152: TIMEOUT, 255: SURVIVED, -9: TIMEOUT}


@dataclass(frozen=True)
class Target:
    """One module under mutation and the test files that guard it."""

    path: str
    tests: tuple[str, ...]
    # Only these functions ("name" or "Class.method"); empty: the whole module. For the probe
    # workers, whose device-bound parts only a real accelerator exercises.
    functions: tuple[str, ...] = ()
    # Mutants that can signal arbitrary processes: only ever run inside a PID namespace.
    needs_isolation: bool = False
    # Tests left out (pytest node ids): timing assertions that mutmut's tracing makes fail.
    deselect: tuple[str, ...] = ()
    # Source lines not mutated (regexes): where a mutant would kill the mutation run itself.
    skip_lines: tuple[str, ...] = ()
    # A mutant times out after this many times its tests' normal duration (mutmut's default: 15).
    timeout_multiplier: float = 15.0
    # "forkserver": each mutant forked from a server that only imported the tests. Forked from the
    # process that ran the whole suite for the stats instead ("fork"), mutants of
    # collectors.hccl.rules.analyse_line that crash on every call "survived". "fork" where the tests' ids are
    # not stable across processes (test_hccn.py parametrizes with functions: ids hold addresses).
    process_isolation: str = "forkserver"

    @property
    def module(self) -> str:
        return self.path[: -len(".py")].replace("/", ".")


# Not tests/unit/test_hostile_output.py: its fuzzing and timing tests take seconds per mutant and assert
# only that parsing survives, which the bounds tests below already pin down value by value.
_KV_TESTS = ("tests/unit/test_npu_smi_kv.py", "tests/unit/test_npu_smi_kv_bounds.py",
             "tests/conformance/test_npu_smi_kv.py")
_HCCN_TESTS = ("tests/unit/test_hccn.py", "tests/unit/test_hccn_bounds.py", "tests/conformance/test_hccn_dmi.py")
_INFO_TESTS = ("tests/unit/test_npu_smi_info.py", "tests/conformance/test_npu_smi_tables.py")
# The unit tests of the workers' pure helpers. Only the package-name imports count: the tests there that
# import the workers as top-level modules (``gemm``, ``_common``) reach no trampoline mutmut switches on.
_PROBE_TESTS = ("tests/unit/test_probe_workers.py",)


def _kv(name: str, *own_tests: str) -> Target:
    return Target(f"collectors/{name}.py", tuple(f"tests/unit/{test}" for test in own_tests) + _KV_TESTS)


def _hccn(name: str) -> Target:
    return Target(f"collectors/{name}.py", _HCCN_TESTS, process_isolation="fork")


TARGETS: tuple[Target, ...] = (
    # The victim filter of kill_tree ("and" -> "or"), _carries_run_id ("==" -> "!=") and the calls of
    # kill_tree (run_id -> None: every process without the variable matches) make a mutant SIGKILL
    # every process it sees, mutmut included (inside the PID namespace: nothing else).
    Target("agent/core/tool_runner.py", ("tests/unit/test_tool_runner.py", "tests/integration/test_tool_runner.py"),
           needs_isolation=True,
           skip_lines=(r"process\.pid not in victims and process\.pid != proc\.pid and _carries_run_id",
                       r"return process\.environ\(\)\.get\(RUN_ID_ENV\) == run_id", r"^\s+return False$",
                       r"kill_tree\(proc, run_id\)")),
    Target("agent/core/snapshot.py", ("tests/unit/test_snapshot.py", "tests/unit/test_exporter.py")),
    Target("agent/core/exposition.py", ("tests/unit/test_exporter.py",)),
    # npu_smi_info_records.py holds dataclasses only: no function body for mutmut to mutate.
    *(Target(f"collectors/{name}.py", _INFO_TESTS) for name in ("npu_smi_info", "npu_smi_info_layout",
                                                                "npu_smi_info_rows")),
    _kv("npu_smi_kv"),
    _kv("npu_smi_usages", "test_npu_smi_usages.py"),
    _kv("npu_smi_common", "test_npu_smi_usages.py"),
    _kv("npu_smi_ecc", "test_npu_smi_health.py"),
    _kv("npu_smi_health", "test_npu_smi_health.py", "test_fault_handling_escalation.py"),
    _kv("npu_smi_memory", "test_npu_smi_memory.py"),
    _kv("npu_smi_power", "test_npu_smi_temp.py"),
    _kv("npu_smi_temp", "test_npu_smi_temp.py"),
    _kv("npu_smi_board", "test_npu_smi_memory.py"),
    _kv("npu_smi_hccs", "test_npu_smi_hccs.py"),
    _kv("npu_smi_hccs_bw", "test_npu_smi_hccs.py"),
    _hccn("hccn_link"),
    _hccn("hccn_link_stat"),
    _hccn("hccn_net_health"),
    _hccn("hccn_optical"),
    _hccn("hccn_stat"),
    Target("collectors/bounds.py", ("tests/unit/test_bounds.py", "tests/unit/test_hccn_bounds.py",
                                    "tests/unit/test_npu_smi_kv_bounds.py", "tests/unit/test_npu_smi_info.py")),
    *(Target(f"collectors/hccl/{name}.py", ("tests/unit/test_hccl_classify.py", "tests/unit/test_hccl_incidents.py",
                                            "tests/conformance/test_hccl_logs.py", "tests/unit/test_hccl_hints.py",
                                            "tests/unit/test_hccl_codes.py", "tests/unit/test_hccl_knowledge_graph.py",
                                            "tests/unit/test_hccl_comm.py"))
      for name in ("classify", "rules", "lines", "codes", "hints", "rendezvous")),
    Target("collectors/hccl/tail.py", ("tests/unit/test_hccl_tail.py", "tests/unit/test_hccl_incidents.py",
                                       "tests/unit/test_log_walk.py", "tests/integration/test_log_walk.py")),
    Target("agent/probes/peaks.py", ("tests/unit/test_peaks.py", "tests/unit/test_probe_workers.py",
                                     "tests/integration/test_probe_workers.py")),
    # Not test_web_security.py / test_web_limits.py: they drive a live server for seconds per mutant;
    # what they check of auth (BUSY under a flood, per-client bounds) tests/unit/test_web_auth.py checks directly.
    Target("agent/web/auth.py", ("tests/unit/test_web_auth.py", "tests/unit/test_web_security.py")),
    Target("collectors/probes/_common.py", _PROBE_TESTS,
           functions=("emit_result", "report_stage", "_hook_matches", "stall_if_requested", "corruption_requested",
                      "looks_like_timeout")),
    # Mutants of the host loops run torch for minutes: 4x the normal time is a hang here.
    Target("collectors/probes/gemm.py", _PROBE_TESTS,
           functions=("row_tolerance_factor", "_host_product", "check_product", "corrupt_one_element"),
           timeout_multiplier=4.0),
    Target("collectors/probes/allreduce.py", _PROBE_TESTS, functions=("bus_bandwidth",)),
    Target("collectors/probes/membw.py", _PROBE_TESTS, functions=("random_buffer", "corrupt_one_element",
                                                                  "copies_match")),
    Target("collectors/probes/p2p.py", _PROBE_TESTS, functions=("ordered_pairs",)),
    Target("collectors/probes/sustained_gemm.py", _PROBE_TESTS, functions=("chunk_size",)),
)

# The [tool.mutmut] section written into each scratch copy's pyproject.toml.
_MUTMUT_SETTINGS: dict[str, object] = {
    "source_paths": ["agent", "collectors"],
    "pytest_add_cli_args": ["-p", "no:cacheprovider"],
    # The tests compare the metrics they render with the README and read fixtures beside them.
    "also_copy": ["README.md", "alerts", "dashboards", "scripts", "systemd", "docs"],
    "timeout_constant": 2.0,
}


@dataclass
class Mutant:
    name: str
    function: str
    status: str
    line: int = 0
    before: str = ""
    after: str = ""
    verdict: Verdict | None = None


@dataclass
class ModuleResult:
    target: Target
    mutants: list[Mutant] = field(default_factory=list)
    seconds: float = 0.0
    error: str = ""

    def count(self, status: str) -> int:
        return sum(1 for mutant in self.mutants if mutant.status == status)

    def classified(self, kind: str) -> int:
        return sum(1 for mutant in self.mutants
                   if mutant.status == SURVIVED and mutant.verdict is not None and mutant.verdict.kind == kind)

    @property
    def score(self) -> float | None:
        relevant = len(self.mutants) - self.classified(EQUIVALENT)
        if relevant <= 0:
            return None
        return 100.0 * (self.count(KILLED) + self.count(TIMEOUT)) / relevant

    def unexplained(self) -> list[Mutant]:
        return [mutant for mutant in self.mutants if mutant.status == SURVIVED and mutant.verdict is None]


# --- reading mutmut's output -------------------------------------------------------------------------


def function_of(mutant_name: str, module: str) -> str:
    """``collectors.bounds.xǁRejectsǁvalue__mutmut_1`` -> ``Rejects.value``; ``..x_clip__mutmut_3`` -> ``clip``."""
    mangled = mutant_name[len(module) + 1:].rsplit("__mutmut_", 1)[0]
    if mangled.startswith("x\u01c1"):
        return ".".join(part for part in mangled[2:].split("\u01c1") if part)
    return mangled[2:] if mangled.startswith("x_") else mangled


def _functions_by_name(tree: ast.Module) -> dict[str, ast.FunctionDef | ast.AsyncFunctionDef]:
    found: dict[str, ast.FunctionDef | ast.AsyncFunctionDef] = {}
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            found[node.name] = node
        elif isinstance(node, ast.ClassDef):
            for item in node.body:
                if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    found[item.name] = item
                    found[f"{node.name}.{item.name}"] = item
    return found


def _lines_of(source_lines: Sequence[str], node: ast.AST) -> list[str]:
    start = getattr(node, "lineno", 1)
    end = getattr(node, "end_lineno", start) or start
    return list(source_lines[start - 1:end])


def changed_line(original: Sequence[str], mutated: Sequence[str]) -> tuple[int, str, str]:
    """(index into ``original``, line before, line after) of the first difference; whitespace-stripped."""
    matcher = difflib.SequenceMatcher(a=list(original), b=list(mutated), autojunk=False)
    for tag, a_start, a_end, b_start, b_end in matcher.get_opcodes():
        if tag == "equal":
            continue
        before = " ".join(line.strip() for line in original[a_start:a_end])
        after = " ".join(line.strip() for line in mutated[b_start:b_end])
        return a_start, before, after
    return 0, "", ""


def describe(mutants: Iterable[Mutant], source_path: Path, mutated_path: Path) -> None:
    """Fill in line/before/after of each mutant from mutmut's mutated copy of the module."""
    source_lines = source_path.read_text(encoding="utf-8").splitlines()
    source_functions = _functions_by_name(ast.parse("\n".join(source_lines)))
    mutated_lines = mutated_path.read_text(encoding="utf-8").splitlines()
    mutated_functions = _functions_by_name(ast.parse("\n".join(mutated_lines)))
    for mutant in mutants:
        local = mutant.name.rsplit(".", 1)[1]
        orig_node = mutated_functions.get(local.rsplit("__mutmut_", 1)[0] + "__mutmut_orig")
        mutant_node = mutated_functions.get(local)
        source_node = source_functions.get(mutant.function)
        if orig_node is None or mutant_node is None:
            continue
        bare = mutant.function.rsplit(".", 1)[-1]
        orig = [line.replace(local.rsplit("__mutmut_", 1)[0] + "__mutmut_orig", bare)
                for line in _lines_of(mutated_lines, orig_node)]
        mutated = [line.replace(local, bare) for line in _lines_of(mutated_lines, mutant_node)]
        index, mutant.before, mutant.after = changed_line(orig, mutated)
        mutant.line = (source_node.lineno + index) if source_node is not None else 0


_RAW_STRING_RE = re.compile(r"(?<![\w\"'])r[\"']")


def _case_only(mutant: Mutant) -> bool:
    """A raw-string (regex) literal changed in letter case only."""
    return (mutant.before != mutant.after and mutant.before.lower() == mutant.after.lower()
            and _RAW_STRING_RE.search(mutant.before) is not None)


def _text_matches(pattern: str, text: str) -> bool:
    """Exact text, or a prefix when ``pattern`` ends with ``*`` (no other wildcards: code has brackets)."""
    return text.startswith(pattern[:-1]) if pattern.endswith("*") else text == pattern


def find_verdict(mutant: Mutant, module: str, verdicts: Iterable[Verdict] = VERDICTS) -> Verdict | None:
    for verdict in verdicts:
        if not fnmatch.fnmatchcase(module, verdict.module) or not fnmatch.fnmatchcase(mutant.function,
                                                                                      verdict.function):
            continue
        if verdict.before == CASE_ONLY and _case_only(mutant):
            return verdict
        if verdict.before == CODEC_CASE and mutant.before != mutant.after and \
                mutant.after == mutant.before.replace('"utf-8"', '"UTF-8"'):
            return verdict
        if _text_matches(verdict.before, mutant.before) and _text_matches(verdict.after, mutant.after):
            return verdict
    return None


def read_results(target: Target, workdir: Path) -> list[Mutant]:
    meta = json.loads((workdir / "mutants" / (target.path + ".meta")).read_text(encoding="utf-8"))
    mutants = []
    for name, exit_code in sorted(meta["exit_code_by_key"].items(), key=lambda item: _natural(item[0])):
        function = function_of(name, target.module)
        if target.functions and function not in target.functions:
            continue
        status = _STATUS_BY_EXIT_CODE.get(exit_code, SURVIVED if exit_code is None else KILLED)
        mutants.append(Mutant(name=name, function=function, status=status))
    describe(mutants, ROOT / target.path, workdir / "mutants" / target.path)
    for mutant in mutants:
        mutant.verdict = find_verdict(mutant, target.module) if mutant.status == SURVIVED else None
    return mutants


def _natural(name: str) -> tuple[str, int]:
    head, _, number = name.rpartition("__mutmut_")
    return head, int(number) if number.isdigit() else -1


# --- running mutmut ------------------------------------------------------------------------------------


def _toml_value(value: object) -> str:
    # JSON strings, numbers and lists of them are valid TOML (tomllib is 3.11+).
    return json.dumps(value)


def mutmut_section(target: Target) -> str:
    settings = dict(_MUTMUT_SETTINGS)
    settings["only_mutate"] = [target.path]
    settings["pytest_add_cli_args_test_selection"] = list(target.tests)
    extra_args = list(settings["pytest_add_cli_args"])  # type: ignore[call-overload]
    for node_id in target.deselect:
        extra_args += ["--deselect", node_id]
    settings["pytest_add_cli_args"] = extra_args
    settings["timeout_multiplier"] = target.timeout_multiplier
    settings["process_isolation"] = target.process_isolation
    if target.skip_lines:
        settings["do_not_mutate_patterns"] = list(target.skip_lines)
    lines = ["", "[tool.mutmut]"] + [f"{key} = {_toml_value(value)}" for key, value in settings.items()]
    return "\n".join(lines) + "\n"


def _tracked_files() -> list[str]:
    listing = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                             cwd=ROOT, capture_output=True, check=True, timeout=60).stdout
    return [name for name in listing.decode().split("\0") if name and (ROOT / name).is_file()]


def prepare(target: Target, workdir: Path) -> None:
    if workdir.exists():
        shutil.rmtree(workdir)
    workdir.mkdir(parents=True)
    for name in _tracked_files():
        destination = workdir / name
        destination.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / name, destination)
    with (workdir / "pyproject.toml").open("a", encoding="utf-8") as pyproject:
        pyproject.write(mutmut_section(target))


def _mutmut_env() -> dict[str, str]:
    env = dict(os.environ)
    corpus = env.get("NPUWATCH_CORPUS") or str(ROOT.parent / "shared" / "corpus")
    env["NPUWATCH_CORPUS"] = corpus
    env["NPUWATCH_HYPOTHESIS"] = "derandomized"  # tests/conftest.py: the same examples for every mutant
    env.pop("PYTHONPATH", None)  # mutmut puts its mutants/ copy first on the path itself
    return env


def pid_namespace(target: Target) -> list[str]:
    """The prefix that runs mutmut as init of a PID namespace of its own, with its own /proc.

    A mutant of tool_runner's kill path (``and`` -> ``or`` in the victim filter) SIGKILLs every
    process it can see: on a shared machine, everyone's. Inside the namespace it sees only the run.
    """
    unshare = shutil.which("unshare")
    if unshare is not None and os.geteuid() == 0:
        return [unshare, "--pid", "--fork", "--mount-proc", "--kill-child",
                sys.executable, str(Path(__file__).resolve()), "--reap", "--"]
    if target.needs_isolation:
        raise SystemExit(f"{target.path} must run as root with unshare(1): its mutants can kill any process")
    return []


def run_module(target: Target, jobs: int, timeout: float) -> ModuleResult:
    workdir = WORK_ROOT / target.module
    result = ModuleResult(target)
    prepare(target, workdir)
    names = [f"{target.module}.x_{name}__mutmut_*" if "." not in name
             else f"{target.module}.x\u01c1{name.replace('.', chr(0x1c1))}__mutmut_*" for name in target.functions]
    started = time.monotonic()
    with (workdir / "mutmut.log").open("wb") as log:
        try:
            proc = subprocess.run([*pid_namespace(target), sys.executable, "-m", "mutmut", "run",
                                   "--max-children", str(jobs), *names],
                                  cwd=workdir, env=_mutmut_env(), stdout=log, stderr=subprocess.STDOUT,
                                  timeout=timeout, start_new_session=True, check=False)
        except subprocess.TimeoutExpired:
            result.error = f"mutmut ran past {timeout:.0f} s"
            return result
    result.seconds = time.monotonic() - started
    (workdir / "seconds.txt").write_text(f"{result.seconds:.1f}\n", encoding="utf-8")
    if proc.returncode != 0:
        result.error = f"mutmut exited {proc.returncode}; see {workdir / 'mutmut.log'}"
        why = failure_summary(workdir / "mutmut.log")
        if why:
            result.error += f" ({why})"
        return result
    result.mutants = read_results(target, workdir)
    return result


def failure_summary(log_path: Path) -> str:
    """Why mutmut stopped, from its log: its own message and the tests that failed in its stats run.

    mutmut prints only "failed to collect stats. runner returned 1" when one of the selected tests fails
    before any mutant runs (in the PID namespace, from the scratch copy): the failing test is in the
    pytest output it dumps above that line.
    """
    try:
        text = log_path.read_text(encoding="utf-8", errors="replace").replace("\r", "\n")
    except OSError:
        return ""
    lines = [line.strip() for line in text.splitlines()]
    failed = [line for line in lines if line.startswith(("FAILED ", "ERROR "))]
    stopped = [line for line in lines if line.startswith(("failed to collect stats", "Stopping early"))]
    return "; ".join(dict.fromkeys(stopped + failed[:5]))


def last_result(target: Target) -> ModuleResult:
    """The module's last run, read back from its scratch copy (verdicts as they are now)."""
    workdir = WORK_ROOT / target.module
    result = ModuleResult(target)
    if not (workdir / "mutants" / (target.path + ".meta")).is_file():
        result.error = "not run yet"
        return result
    with contextlib.suppress(OSError, ValueError):
        result.seconds = float((workdir / "seconds.txt").read_text(encoding="utf-8"))
    result.mutants = read_results(target, workdir)
    return result


def reap_as_init(argv: Sequence[str]) -> int:
    """PID 1 of the namespace: run ``argv`` and reap every orphan re-parented here until it exits.

    Without this, mutmut itself would be init and the tool_runner tests that check for zombies
    would find the orphans of earlier tests under it.
    """
    child = subprocess.Popen(list(argv))
    while True:
        pid, status = os.wait()
        if pid == child.pid:
            return os.waitstatus_to_exitcode(status)


# --- output --------------------------------------------------------------------------------------------

COLUMNS = ("module", "mutants", "killed", "survived", "timeout", "equivalent", "accepted", "score %", "min")


def table_row(result: ModuleResult) -> list[str]:
    if result.error:
        return [result.target.path, "-", "-", "-", "-", "-", "-", result.error, f"{result.seconds / 60:.1f}"]
    score = result.score
    return [result.target.path, str(len(result.mutants)), str(result.count(KILLED)), str(result.count(SURVIVED)),
            str(result.count(TIMEOUT)), str(result.classified(EQUIVALENT)), str(result.classified(ACCEPTED)),
            "-" if score is None else f"{score:.1f}", f"{result.seconds / 60:.1f}"]


def markdown_table(results: Sequence[ModuleResult]) -> str:
    lines = ["| " + " | ".join(COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]
    lines += ["| " + " | ".join(table_row(result)) + " |" for result in results]
    return "\n".join(lines)


def survivor_lines(result: ModuleResult, *, explained: bool) -> list[str]:
    lines = []
    for mutant in result.mutants:
        if mutant.status != SURVIVED or (mutant.verdict is not None) != explained:
            continue
        where = f"{result.target.path}:{mutant.line} ({mutant.function})"
        change = f"`{mutant.before}` -> `{mutant.after}`"
        why = f" - {mutant.verdict.kind}: {mutant.verdict.reason}" if mutant.verdict is not None else ""
        lines.append(f"- {where}: {change}{why}  [{mutant.name}]")
    return lines


def find_targets(names: Sequence[str]) -> list[Target]:
    if not names:
        return list(TARGETS)
    chosen = []
    for name in names:
        matches = [target for target in TARGETS
                   if name in (target.path, target.module, target.module.rsplit(".", 1)[1])
                   or fnmatch.fnmatch(target.module, name)]
        if not matches:
            raise SystemExit(f"no module {name!r}; see --list")
        chosen += [target for target in matches if target not in chosen]
    return chosen


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:2] == ["--reap", "--"]:  # internal: init of the PID namespace (see pid_namespace)
        return reap_as_init(argv[2:])
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--module", action="append", default=[],
                        help="run this module only (path, dotted name, last part or glob); repeatable")
    parser.add_argument("--list", action="store_true", help="show the module -> test files mapping and stop")
    parser.add_argument("--survivors", action="store_true", help="list unexplained survivors after the table")
    parser.add_argument("--explained", action="store_true", help="also list survivors with a verdict")
    parser.add_argument("--report", action="store_true",
                        help="no run: the table (and survivors) of each module's last run in build/mutation")
    parser.add_argument("--jobs", type=int, default=2, help="mutants run at once (default 2)")
    parser.add_argument("--timeout", type=float, default=3600.0, help="seconds one module may take")
    args = parser.parse_args(argv)
    targets = find_targets(args.module)
    if args.list:
        for target in targets:
            only = f"  [only: {', '.join(target.functions)}]" if target.functions else ""
            print(f"{target.path}{only}\n    " + "\n    ".join(target.tests))
        return 0
    results = []
    if args.report:
        results = [last_result(target) for target in targets]
    elif shutil.which("git") is None:
        raise SystemExit("git is needed to list the files to copy")
    for target in [] if args.report else targets:
        print(f"... {target.path}", file=sys.stderr, flush=True)
        results.append(run_module(target, args.jobs, args.timeout))
    print(markdown_table(results))
    for result in results:
        explained = survivor_lines(result, explained=True) if args.explained else []
        open_ = survivor_lines(result, explained=False) if args.survivors else []
        if explained or open_:
            print(f"\n### {result.target.path}\n")
        if explained:
            print("Equivalent or accepted:\n\n" + "\n".join(explained) + "\n")
        if open_:
            print("Not explained yet (a test should kill these):\n\n" + "\n".join(open_) + "\n")
    low = [result for result in results if result.error or (result.score or 0.0) < TARGET_SCORE]
    return 1 if low else 0


if __name__ == "__main__":
    sys.exit(main())
