"""The demo node: a directory holding the state file and the fake tools' executables.

``DemoNode(dir).create()`` writes ``state.json`` and ``bin/{npu-smi,hccn_tool,ascend-dmi}``;
faults are switched with ``set_fault`` / ``clear_fault`` while the agent keeps calling the tools.
From a shell: ``python -m agent.demo.node DIR set link_flap --chip 3 --param period_s=4``.
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import json
import os
import shlex
import stat
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import agent
from agent.demo.state import (
    CHIP_FAULTS,
    DEMO_DIR_ENV,
    NODE_FAULTS,
    STATE_FILE,
    DemoState,
    demo_now,
    load_state,
    save_state,
)

__all__ = ["TOOL_MODULES", "DemoNode", "demo_overrides", "main", "start_demo"]

# executable name -> module whose main() it runs
TOOL_MODULES = {
    "npu-smi": "agent.demo.fake_npu_smi",
    "hccn_tool": "agent.demo.fake_hccn_tool",
    "ascend-dmi": "agent.demo.fake_ascend_dmi",
}
_SHEBANG_MAX = 120  # older kernels cut the #! line at 127 bytes
_EXECUTABLE = stat.S_IRWXU | stat.S_IRGRP | stat.S_IXGRP | stat.S_IROTH | stat.S_IXOTH


def _python_body(module: str, directory: Path) -> str:
    # -I -S keeps start-up fast and immune to the caller's PYTHON* variables; the package root
    # and the demo directory are baked in so the fakes also work from a clean environment.
    package_root = str(Path(agent.__file__).resolve().parent.parent)
    return (
        "import os, sys\n"
        f"sys.path.insert(0, {package_root!r})\n"
        f"os.environ[{DEMO_DIR_ENV!r}] = {str(directory)!r}\n"
        f"from {module} import main\n"
        "sys.exit(main())\n"
    )


class DemoNode:
    """A simulated 910B node rooted at ``directory`` (see module docstring)."""

    def __init__(self, directory: Path | str) -> None:
        self.directory = Path(directory).resolve()

    @property
    def bin_dir(self) -> Path:
        return self.directory / "bin"

    @property
    def state_path(self) -> Path:
        return self.directory / STATE_FILE

    def tool_path(self, name: str) -> Path:
        """Path of the executable ``npu-smi``, ``hccn_tool`` or ``ascend-dmi``."""
        if name not in TOOL_MODULES:
            raise ValueError(f"unknown tool {name!r}; expected one of {sorted(TOOL_MODULES)}")
        return self.bin_dir / name

    def exists(self) -> bool:
        """True when the state file and all three executables are in place."""
        return self.state_path.is_file() and all(self.tool_path(name).is_file() for name in TOOL_MODULES)

    def create(self, chips: int = 8, model: str = "910B3", delay_s: float = 0.0, seed: int = 0) -> DemoNode:
        """Write a fresh state (no faults) and the tool executables; returns self."""
        if not 1 <= chips <= 16:
            raise ValueError(f"chips must be 1..16, got {chips}")
        if delay_s < 0:
            raise ValueError(f"delay_s must be >= 0, got {delay_s}")
        self.directory.mkdir(parents=True, exist_ok=True)
        state = DemoState(chips=chips, model=model, seed=seed, delay_s=delay_s, created_at=time.time())
        save_state(self.directory, state)
        self.write_executables()
        return self

    def write_executables(self) -> None:
        """(Re)write bin/ for the current interpreter."""
        self.bin_dir.mkdir(parents=True, exist_ok=True)
        python = sys.executable
        for name, module in TOOL_MODULES.items():
            body = _python_body(module, self.directory)
            if len(python) <= _SHEBANG_MAX and not any(ch.isspace() for ch in python):
                script = f"#!{python} -IS\n{body}"
            else:
                sidecar = self.bin_dir / f".{name}.py"
                sidecar.write_text(body, encoding="utf-8")
                script = f'#!/bin/sh\nexec {shlex.quote(python)} -IS {shlex.quote(str(sidecar))} "$@"\n'
            target = self.tool_path(name)
            tmp = target.with_name(f".{name}.tmp")
            tmp.write_text(script, encoding="utf-8")
            tmp.chmod(_EXECUTABLE)
            os.replace(tmp, target)

    def read(self) -> DemoState:
        return load_state(self.directory)

    @contextlib.contextmanager
    def _editing(self) -> Iterator[DemoState]:
        """Read-modify-write the state under an exclusive lock (concurrent togglers lose nothing)."""
        with open(self.directory / ".lock", "a+", encoding="utf-8") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            state = self.read()
            yield state
            save_state(self.directory, state)

    def set_fault(self, name: str, /, chip: int | None = None, **params: Any) -> None:
        """Switch a fault on (or replace its parameters). ``since`` defaults to the demo clock.

        ``name`` is positional-only so that a fault may take a parameter called ``name``
        (``process`` does: the process name).
        """
        json.dumps(params)  # parameters must survive the JSON file
        with self._editing() as state:
            params.setdefault("since", demo_now(state))
            if name in CHIP_FAULTS:
                if chip is None or not 0 <= chip < state.chips:
                    raise ValueError(f"fault {name!r} needs chip in 0..{state.chips - 1}, got {chip}")
                state.chip_faults.setdefault(str(chip), {})[name] = params
            elif name in NODE_FAULTS:
                if chip is not None:
                    raise ValueError(f"fault {name!r} is node-wide; do not pass chip")
                state.node_faults[name] = params
            else:
                raise ValueError(f"unknown fault {name!r}; known: {sorted(CHIP_FAULTS | NODE_FAULTS)}")

    def clear_fault(self, name: str, chip: int | None = None) -> None:
        """Switch a fault off (no error when it was not on)."""
        with self._editing() as state:
            if chip is None:
                state.node_faults.pop(name, None)
                return
            faults = state.chip_faults.get(str(chip), {})
            faults.pop(name, None)
            if not faults:
                state.chip_faults.pop(str(chip), None)

    def clear_all(self) -> None:
        with self._editing() as state:
            state.node_faults.clear()
            state.chip_faults.clear()

    def set_delay(self, delay_s: float) -> None:
        """Seconds every fake call sleeps before answering (benchmarks use 0.3)."""
        with self._editing() as state:
            state.delay_s = float(delay_s)

    def freeze_time(self, at: float | None) -> None:
        """Freeze the fakes' clock at ``at`` (None: real time). NPUWATCH_DEMO_TIME still wins."""
        with self._editing() as state:
            state.time_override = at

    def env(self) -> dict[str, str]:
        """Variables that point a child process at this node: the state dir and bin/ first on PATH."""
        path = os.environ.get("PATH", os.defpath)
        return {DEMO_DIR_ENV: str(self.directory), "PATH": f"{self.bin_dir}{os.pathsep}{path}"}


def demo_overrides(demo_dir: Path, bin_dir: Path) -> dict[str, Any]:
    """Config keys the demo replaces (dotted, for ``agent.core.config.apply_overrides``)."""
    return {
        "collectors.npu_smi.path": str(bin_dir / "npu-smi"),
        "collectors.hccn_tool.path": str(bin_dir / "hccn_tool"),
        "collectors.ascend_dmi.path": str(bin_dir / "ascend-dmi"),
        "collectors.hccl_logs.paths": [str(demo_dir / "log")],
        "state_dir": str(demo_dir / "state"),
        "probes.lock_file": str(demo_dir / "state" / "probe.lock"),
        # The demo's probes run on the CPU and often, so their panels fill within minutes. Its
        # AI Core load is synthetic, so only a listed NPU process (the `process` fault) holds
        # probes back.
        "probes.backend": "cpu",
        "probes.idle_aicore_threshold": 1.0,
        "probes.gemm.interval": 120.0,
        "probes.gemm.jitter": 10.0,
        "probes.allreduce.interval": 300.0,
        "probes.allreduce.jitter": 10.0,
    }


def start_demo(
    directory: Path | str | None = None, chips: int = 8, model: str = "910B3", delay_s: float = 0.0
) -> DemoNode:
    """Create a demo node for ``npuwatch run --demo`` (under a new temp dir when none is given)."""
    if directory is None:
        directory = tempfile.mkdtemp(prefix="npuwatch-demo-")
    return DemoNode(Path(directory)).create(chips=chips, model=model, delay_s=delay_s)


def _param(text: str) -> tuple[str, Any]:
    key, sep, raw = text.partition("=")
    if not sep:
        raise argparse.ArgumentTypeError(f"expected key=value, got {text!r}")
    try:
        return key, json.loads(raw)
    except json.JSONDecodeError:
        return key, raw


def main(argv: list[str] | None = None) -> int:
    """``python -m agent.demo.node DIR create|show|set|clear|clear-all ...``."""
    parser = argparse.ArgumentParser(prog="python -m agent.demo.node", description="Drive a demo NPU node.")
    parser.add_argument("directory", type=Path)
    sub = parser.add_subparsers(dest="action", required=True)
    create = sub.add_parser("create", help="write a fresh node")
    create.add_argument("--chips", type=int, default=8)
    create.add_argument("--delay", type=float, default=0.0)
    sub.add_parser("show", help="print the state")
    for action in ("set", "clear"):
        cmd = sub.add_parser(action, help=f"{action} a fault")
        cmd.add_argument("fault", choices=sorted(CHIP_FAULTS | NODE_FAULTS))
        cmd.add_argument("--chip", type=int)
        if action == "set":
            cmd.add_argument(
                "--param",
                dest="params",
                action="append",
                default=[],
                type=_param,
                metavar="KEY=VALUE",
                help="fault parameter (JSON values accepted), repeatable",
            )
    sub.add_parser("clear-all", help="switch every fault off")
    args = parser.parse_args(argv)
    node = DemoNode(args.directory)
    if args.action == "create":
        node.create(chips=args.chips, delay_s=args.delay)
        print(f"demo node in {node.directory}; tools in {node.bin_dir}")
    elif args.action == "show":
        print(node.read().to_json())
    elif args.action == "set":
        node.set_fault(args.fault, args.chip, **dict(args.params))
    elif args.action == "clear":
        node.clear_fault(args.fault, args.chip)
    else:
        node.clear_all()
    return 0


if __name__ == "__main__":
    sys.exit(main())
