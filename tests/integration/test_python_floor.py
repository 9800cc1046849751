"""The agent runs on Python 3.9 and the probe workers on 3.8 (the interpreters Ascend nodes and training
images have), enforced here on the newest Python: vermin (pinned) finds syntax and standard-library use
newer than the floor, and an AST check finds what vermin does not look for: ``X | Y`` evaluated at run
time (``isinstance(x, int | str)``, a module-level type alias), which 3.9 rejects with a TypeError.
"""

from __future__ import annotations

import ast
import shutil
import subprocess
import sysconfig
from pathlib import Path

import pytest

from tests.support.paths import REPO

AGENT_FLOOR = "3.9"
WORKER_FLOOR = "3.8"
WORKERS = REPO / "collectors" / "probes"
# The DCMI worker (python -m collectors.dcmi.worker) and every repository module it imports.
DCMI_WORKER = ("collectors/__init__.py", "collectors/dcmi/__init__.py", "collectors/dcmi/worker.py",
               "collectors/dcmi/api.py", "collectors/dcmi/errors.py", "collectors/dcmi/readings.py",
               "collectors/dcmi/structs.py", "collectors/dcmi/events.py", "collectors/dcmi/serve.py")
_TYPE_NAMES = {"int", "str", "float", "bytes", "bool", "list", "dict", "tuple", "set", "frozenset", "type",
               "object", "complex", "bytearray"}


def vermin(target: str, *paths: Path) -> subprocess.CompletedProcess[str]:
    exe = shutil.which("vermin", path=sysconfig.get_path("scripts")) or shutil.which("vermin")
    assert exe, "vermin missing: pip install -e '.[test]'"
    return subprocess.run([exe, f"-t={target}-", "--no-tips", "--violations", "--no-parse-comments",
                           *map(str, paths)], capture_output=True, text=True, timeout=300, cwd=REPO)


def _is_type_expression(node: ast.expr) -> bool:
    if isinstance(node, ast.Constant):
        return node.value is None
    if isinstance(node, ast.Name):
        return node.id in _TYPE_NAMES or (node.id[:1].isupper() and not node.id.isupper())
    if isinstance(node, ast.Attribute):
        return node.attr[:1].isupper() and not node.attr.isupper()
    if isinstance(node, ast.Subscript):
        return _is_type_expression(node.value)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
        return _is_type_expression(node.left) and _is_type_expression(node.right)
    return False


def runtime_unions(source: str) -> list[int]:
    """Lines where ``A | B`` of types is evaluated at run time (annotations are not, with the future import)."""
    tree = ast.parse(source)
    annotations: set[int] = set()
    for node in ast.walk(tree):
        parts: list[ast.expr | None] = []
        if isinstance(node, (ast.arg, ast.AnnAssign)):
            parts = [node.annotation]
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            parts = [node.returns]
        for part in parts:
            if part is not None:
                annotations.update(id(inner) for inner in ast.walk(part))
    found = []
    for node in ast.walk(tree):
        if (isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr) and id(node) not in annotations
                and _is_type_expression(node)):
            found.append(node.lineno)
    return sorted(set(found))


def test_the_agent_needs_nothing_newer_than_3_9() -> None:
    result = vermin(AGENT_FLOOR, REPO / "agent", REPO / "collectors")
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"Minimum required versions: {AGENT_FLOOR}" in result.stdout or "Minimum required versions: 3.8" in \
        result.stdout, result.stdout


def test_the_probe_workers_need_nothing_newer_than_3_8() -> None:
    result = vermin(WORKER_FLOOR, WORKERS)
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_dcmi_worker_needs_nothing_newer_than_3_8() -> None:
    result = vermin(WORKER_FLOOR, *(REPO / path for path in DCMI_WORKER))
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_dcmi_worker_imports_only_the_modules_held_to_3_8() -> None:
    """A new import from the worker's modules would escape the 3.8 check above: it must be listed there."""
    ours = ("agent", "collectors")
    imported = set()
    for path in DCMI_WORKER:
        for node in ast.walk(ast.parse((REPO / path).read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] in ours:
                imported.add(node.module.replace(".", "/") + ".py")
            elif isinstance(node, ast.Import):
                imported.update(alias.name.replace(".", "/") + ".py" for alias in node.names
                                if alias.name.split(".")[0] in ours)
    assert imported <= set(DCMI_WORKER)


def test_vermin_rejects_a_310_construct(tmp_path: Path) -> None:
    sample = tmp_path / "newer.py"
    sample.write_text("def f(x):\n    match x:\n        case 1:\n            return 1\n"
                      "    return zip([1], [2], strict=True)\n")
    result = vermin(AGENT_FLOOR, sample)
    assert result.returncode != 0
    assert "3.10" in result.stdout


@pytest.mark.parametrize("root", ["agent", "collectors"])
def test_no_type_union_is_evaluated_at_run_time(root: str) -> None:
    offenders = {str(path.relative_to(REPO)): lines for path in sorted((REPO / root).rglob("*.py"))
                 if (lines := runtime_unions(path.read_text(encoding="utf-8")))}
    assert offenders == {}


@pytest.mark.parametrize(("source", "lines"), [
    ("from __future__ import annotations\ndef f(x: int | None) -> str | None:\n    return None\n", []),
    ("def f(x):\n    return isinstance(x, int | str)\n", [2]),
    ("Alias = dict[str, float | None]\n", [1]),
    ("import os\nFLAGS = os.O_WRONLY | os.O_CREAT\n", []),
    ("value = 3 | 4\n", []),
])
def test_the_union_check_finds_what_3_9_rejects(source: str, lines: list[int]) -> None:
    assert runtime_unions(source) == lines
