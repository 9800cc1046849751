"""The package layout holds: no import cycles, every cross-package import is one docs/architecture.md allows,
and no module is over MAX_MODULE_LINES lines unless docs/architecture.md says why.

Imports are read from the AST of every module, wherever they stand (module level, inside a function,
under ``if TYPE_CHECKING``): hiding an import does not break a cycle.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.paths import REPO
from tests.support.tiers import TIERS, StartsSomething

ROOTS = ("agent", "collectors")
# agent.health.probe_limits is a leaf of its own: the config and the probes, below agent.health, read it.
# agent.web.page (the node page) reads the judgement; the server below it takes the page as a callback.
PACKAGES = ("agent.core", "agent.web", "agent.web.page", "agent.probes", "agent.demo", "agent.handling", "agent.health",
            "agent.health.probe_limits", "agent.diagnose", "agent.triage", "agent.check", "agent.top", "agent.daemon",
            "agent.k8s", "agent.dcmi", "collectors.probes")


def module_files() -> dict[str, Path]:
    found: dict[str, Path] = {}
    for root in ROOTS:
        for path in sorted((REPO / root).rglob("*.py")):
            parts = path.relative_to(REPO).with_suffix("").parts
            name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
            found[name] = path
    return found


MODULES = module_files()


def imported_names(path: Path) -> Iterator[str]:
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            yield node.module
            yield from (f"{node.module}.{alias.name}" for alias in node.names)


def resolve(name: str) -> str | None:
    """The repository module an imported name refers to (``from a import b`` may name module a.b)."""
    while name and name not in MODULES:
        name = name.rpartition(".")[0]
    return name or None


def import_graph() -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {name: set() for name in MODULES}
    for name, path in MODULES.items():
        for imported in imported_names(path):
            target = resolve(imported)
            if target is not None and target != name:
                graph[name].add(target)
    return graph


def package_of(module: str) -> str:
    if module in ("agent.cli", "agent.__main__"):
        return "agent.cli"
    for package in sorted(PACKAGES, key=len, reverse=True):
        if module == package or module.startswith(package + "."):
            return package
    return module.split(".", maxsplit=1)[0]


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one node (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = 0
    for start, targets in graph.items():
        if start in index:
            continue
        work = [(start, iter(sorted(targets)))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, edges = work[-1]
            advanced = False
            for nxt in edges:
                if nxt not in index:
                    index[nxt] = low[nxt] = counter
                    counter += 1
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(sorted(graph[nxt]))))
                    advanced = True
                    break
                if nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
            if advanced:
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def allowed_imports() -> dict[str, set[str]]:
    """The 'may import' column of docs/architecture.md's package table."""
    text = (REPO / "docs" / "architecture.md").read_text(encoding="utf-8")
    table: dict[str, set[str]] = {}
    for line in text.splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if len(cells) == 3 and re.fullmatch(r"`[a-z0-9_.]+`", cells[0]):
            table[cells[0].strip("`")] = set(re.findall(r"`([a-z0-9_.]+)`", cells[2]))
    return table


GRAPH = import_graph()
MAX_MODULE_LINES = 600
LONG_MODULES_SECTION = "## Modules over 600 lines"


def module_lengths() -> dict[str, int]:
    """Lines per module, keyed by its path from the repository root."""
    return {path.relative_to(REPO).as_posix(): len(path.read_text(encoding="utf-8").splitlines())
            for path in MODULES.values()}


def long_module_reasons(text: str) -> dict[str, str]:
    """The ``- `path`: reason`` items of docs/architecture.md's section on modules over the limit."""
    _, found, rest = text.partition("\n" + LONG_MODULES_SECTION + "\n")
    assert found, f"docs/architecture.md has no section {LONG_MODULES_SECTION!r}"
    section = rest.split("\n## ", 1)[0]
    return {match.group(1): match.group(2).strip()
            for match in re.finditer(r"^- `([^`]+)`:(.*)$", section, re.MULTILINE)}


def unexplained_long_modules(lengths: dict[str, int], reasons: dict[str, str]) -> list[str]:
    return sorted(path for path, lines in lengths.items() if lines > MAX_MODULE_LINES and not reasons.get(path))


ARCHITECTURE_TEXT = (REPO / "docs" / "architecture.md").read_text(encoding="utf-8")


def test_the_walk_sees_the_modules_and_their_imports() -> None:
    assert "agent.daemon.service" in MODULES and "collectors.npu_smi_info" in MODULES
    assert "agent.core.snapshot" in GRAPH["agent.daemon.service"]
    assert len(MODULES) > 80


def test_no_import_cycle_between_modules() -> None:
    assert cycles(GRAPH) == []


def test_cycle_detection_finds_a_planted_cycle() -> None:
    planted = {name: set(targets) for name, targets in GRAPH.items()}
    planted["agent.core.snapshot"].add("agent.daemon.service")
    assert any({"agent.core.snapshot", "agent.daemon.service"} <= set(c) for c in cycles(planted))


def test_every_package_is_in_the_architecture_table() -> None:
    packages = {package_of(module) for module in MODULES}
    assert packages == set(allowed_imports())


def package_edges(graph: dict[str, set[str]]) -> dict[tuple[str, str], list[str]]:
    edges: dict[tuple[str, str], list[str]] = {}
    for module, targets in graph.items():
        for target in targets:
            pair = (package_of(module), package_of(target))
            if pair[0] != pair[1]:
                edges.setdefault(pair, []).append(f"{module} -> {target}")
    return edges


def test_cross_package_imports_are_allowed() -> None:
    allowed = allowed_imports()
    bad = {f"{source} -> {target}": examples for (source, target), examples in package_edges(GRAPH).items()
           if target not in allowed[source]}
    assert bad == {}


@pytest.mark.parametrize("module", sorted(m for m in MODULES if m.startswith("collectors")))
def test_collectors_never_import_agent(module: str) -> None:
    assert not [target for target in GRAPH[module] if target.startswith("agent")]


def test_probe_workers_import_nothing_from_the_repository() -> None:
    for module in (m for m in MODULES if m.startswith("collectors.probes.")):
        imported = {name.split(".")[0] for name in imported_names(MODULES[module])}
        assert not imported & {"agent", "collectors"}, module


def test_a_forbidden_import_is_reported() -> None:
    planted = {name: set(targets) for name, targets in GRAPH.items()}
    planted["collectors.npu_smi_info"].add("agent.core.snapshot")
    allowed = allowed_imports()
    edges = package_edges(planted)
    assert ("collectors", "agent.core") in edges
    assert "agent.core" not in allowed["collectors"]


def test_no_module_is_over_the_limit_without_a_written_reason() -> None:
    lengths = module_lengths()
    assert lengths["collectors/npu_smi_info.py"] > 100  # the walk reads the real files
    assert unexplained_long_modules(lengths, long_module_reasons(ARCHITECTURE_TEXT)) == []


def test_every_listed_long_module_is_still_long() -> None:
    """A module split below the limit leaves the list (so the list stays a true account)."""
    lengths = module_lengths()
    listed = long_module_reasons(ARCHITECTURE_TEXT)
    assert sorted(path for path in listed if lengths.get(path, 0) <= MAX_MODULE_LINES) == []


def test_a_long_module_without_a_reason_is_reported() -> None:
    lengths = {"agent/core/planted.py": MAX_MODULE_LINES + 1, "agent/core/short.py": MAX_MODULE_LINES}
    text = f"intro\n{LONG_MODULES_SECTION}\n\nwhy\n\n- `agent/core/planted.py`: \n\n## Next\n- `x.py`: later\n"
    reasons = long_module_reasons(text)
    assert reasons == {"agent/core/planted.py": ""}  # an empty reason is no reason; the next section is not read
    assert unexplained_long_modules(lengths, reasons) == ["agent/core/planted.py"]
    assert unexplained_long_modules(lengths, {"agent/core/planted.py": "generated"}) == []


def test_every_package_is_in_the_distribution() -> None:
    """pyproject's explicit package list names every package under agent/ and collectors/ (a new one left
    out installs from a checkout but is missing from the wheel and the offline bundle)."""
    text = (REPO / "pyproject.toml").read_text(encoding="utf-8")
    listed = set(re.findall(r'"([a-z0-9_.]+)"', text.split("packages = [", 1)[1].split("]", 1)[0]))
    found = {".".join(init.parent.relative_to(REPO).parts)
             for root in ROOTS for init in (REPO / root).rglob("__init__.py")}
    assert found - listed == set(), "packages missing from pyproject.toml"
    assert listed - found == set(), "pyproject.toml lists packages that do not exist"


# --- the test suite's own layout (docs/development.md, "Test layout")
TESTS = REPO / "tests"


def suite_modules() -> list[Path]:
    return sorted(path for path in TESTS.rglob("test_*.py") if "fixtures" not in path.relative_to(TESTS).parts)


def imported_test_modules(path: Path) -> list[str]:
    """The test modules (``test_*``) that ``path`` imports, however it spells the import."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            module = node.module or ""
            names = [module, *(f"{module}.{alias.name}" for alias in node.names)]
        else:
            continue
        found += [name for name in names if any(part.startswith("test_") for part in name.split("."))]
    return found


def test_no_test_module_imports_another() -> None:
    """Shared pieces live in tests/support: a test module imported elsewhere runs its tests twice and
    ties two subjects together."""
    offenders = {str(path.relative_to(REPO)): imported for path in suite_modules()
                 if (imported := imported_test_modules(path))}
    assert offenders == {}


def test_the_import_check_sees_a_planted_test_import(tmp_path: Path) -> None:
    planted = tmp_path / "test_planted.py"
    planted.write_text("from tests.unit.test_config import x\nimport tests.integration.test_shutdown\n"
                       "from tests.support import paths\n")
    assert imported_test_modules(planted) == ["tests.unit.test_config", "tests.unit.test_config.x",
                                              "tests.integration.test_shutdown"]


def test_every_test_module_sits_in_a_tier_directory() -> None:
    """tests/unit, tests/integration, tests/e2e or tests/conformance, directly: the tier markers and the
    fast-tier command (./scripts/test tests/unit tests/conformance) go by the directory."""
    misplaced = [str(path.relative_to(REPO)) for path in suite_modules()
                 if len(path.relative_to(TESTS).parts) != 2 or path.relative_to(TESTS).parts[0] not in TIERS]
    assert misplaced == []


def test_support_holds_no_tests() -> None:
    support = TESTS / "support"
    assert (support / "__init__.py").is_file()
    assert [path.name for path in support.glob("test_*.py")] == []


def test_a_fast_tier_test_cannot_start_a_process() -> None:
    """tests/conftest.py refuses subprocesses, forks and listening sockets in the unit and conformance tiers."""
    import socket
    import subprocess

    with pytest.raises(StartsSomething, match="move it to tests/integration"):
        subprocess.run(["true"], check=False)
    with socket.socket() as sock, pytest.raises(StartsSomething):
        sock.listen()
