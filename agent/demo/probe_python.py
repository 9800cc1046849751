"""The demo's probe interpreter: ``bin/probe-python WORKER.py ARGS...`` runs a probe worker here.

In demo mode ``probes.python`` points at this wrapper, so the node's probe faults reach the
workers (collectors/probes/*.py) without changing them:

- ``probe_error``: ``import torch`` fails, as in an environment without torch;
- ``probe_corrupt``: sets the workers' own test hook ``NPUWATCH_PROBE_CORRUPT=<probe>``;
- ``probe_slow``: ``time.perf_counter`` runs 1/factor times too fast in the worker, so the wall
  timer of a CPU run measures ``factor`` times the real GEMM FLOP/s and all-reduce bandwidth.

Without a fault (or a readable demo state) the worker runs untouched under this interpreter.
"""

from __future__ import annotations

import os
import runpy
import sys
import time
from collections.abc import Callable, Sequence
from importlib.machinery import ModuleSpec
from typing import Any

from agent.demo.state import DEMO_DIR_ENV, DemoState, load_state

__all__ = ["CORRUPT_ENV", "main"]

CORRUPT_ENV = "NPUWATCH_PROBE_CORRUPT"  # honoured by collectors/probes/_common.py
_HIDDEN = ("torch", "torch_npu")


class _NoTorch:
    """A meta path finder that makes torch unimportable (demo fault ``probe_error``)."""

    def find_spec(self, fullname: str, path: Sequence[str] | None = None, target: Any = None) -> ModuleSpec | None:
        if fullname.partition(".")[0] in _HIDDEN:
            raise ModuleNotFoundError(f"No module named {fullname!r} (demo fault probe_error)", name=fullname)
        return None


def _stretched(clock: Callable[[], float], factor: float) -> Callable[[], float]:
    start = clock()
    return lambda: start + (clock() - start) / factor


def apply_faults(state: DemoState, environ: dict[str, str] | Any = os.environ) -> None:
    """Make this process behave as the node's probe faults say."""
    if state.node_fault("probe_error") is not None:
        sys.meta_path.insert(0, _NoTorch())  # type: ignore[arg-type]
    corrupt = state.node_fault("probe_corrupt")
    if corrupt is not None:
        environ[CORRUPT_ENV] = str(corrupt.get("probe", "gemm"))
    slow = state.node_fault("probe_slow")
    if slow is not None:
        time.perf_counter = _stretched(time.perf_counter, float(slow.get("factor", 0.5)))


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if not args or args[0].startswith("-"):
        sys.stderr.write("usage: probe-python WORKER.py [ARGS...] (the demo's probe interpreter)\n")
        return 2
    directory = os.environ.get(DEMO_DIR_ENV)
    if directory:
        try:
            apply_faults(load_state(directory))
        except (OSError, ValueError) as exc:
            sys.stderr.write(f"probe-python: demo state unreadable ({exc}); running without faults\n")
    script = os.path.abspath(args[0])
    sys.argv = [script, *args[1:]]
    sys.path.insert(0, os.path.dirname(script))  # as `python WORKER.py` would: the workers import _common
    runpy.run_path(script, run_name="__main__")
    return 0


if __name__ == "__main__":
    sys.exit(main())
