"""The demo node: a directory holding the state file, the fake tools and the demo's probe interpreter.

``DemoNode(dir).create()`` writes ``state.json`` and ``bin/{npu-smi,hccn_tool,ascend-dmi,probe-python}``;
faults are switched with ``set_fault`` / ``clear_fault`` while the agent keeps calling the tools
(the catalogue, with each fault's parameters, is agent.demo.faults). ``demo_overrides`` is
the config the demo replaces or extends. From a shell:
``python -m agent.demo.node DIR set link_flap --chip 3 --param period_s=4``.
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import importlib.util
import json
import logging
import os
import shlex
import stat
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import agent
from agent.demo.carry import end_chip_fault
from agent.demo.discovery import running_agent, this_install
from agent.demo.faults import FAULTS, LOG_FAULTS, check_params, fault_spec
from agent.demo.plog import (
    HcclTimeout,
    RoceCqe,
    append_job_log,
    append_plog,
    hccl_timeout_lines,
    plog_timestamp,
    roce_cqe_lines,
)
from agent.demo.render_model import device_ip
from agent.demo.render_npu_smi import processes_of
from agent.demo.state import (
    DEMO_DIR_ENV,
    STATE_FILE,
    DemoDirUnusable,
    DemoState,
    demo_now,
    load_state,
    save_state,
)

if TYPE_CHECKING:
    from agent.core.config import Config

__all__ = [
    "DEMO_PROBE_SCHEDULE",
    "PROBE_PYTHON",
    "TOOL_MODULES",
    "DemoNode",
    "NoDemoNode",
    "demo_overrides",
    "main",
    "open_demo",
    "start_demo",
]

log = logging.getLogger(__name__)

# executable name -> module whose main() it runs
TOOL_MODULES = {
    "npu-smi": "agent.demo.fake_npu_smi",
    "hccn_tool": "agent.demo.fake_hccn_tool",
    "ascend-dmi": "agent.demo.fake_ascend_dmi",
}
PROBE_PYTHON = "probe-python"  # the demo's probes.python (agent.demo.probe_python)
_SHEBANG_MAX = 120  # older kernels cut the #! line at 127 bytes
_EXECUTABLE = stat.S_IRWXU | stat.S_IRGRP | stat.S_IXGRP | stat.S_IROTH | stat.S_IXOTH
# The demo's probe schedule: GEMM first at 30 s then every 2 min, all-reduce first at 90 s then every
# 4 min, no jitter: the two never meet on the probe lock, and both have a result within 3 minutes.
DEMO_PROBE_SCHEDULE = {"gemm": {"first_run": 30.0, "interval": 120.0},
                       "allreduce": {"first_run": 90.0, "interval": 240.0}}
CPU_TORCH_HINT = "pip install torch --index-url https://download.pytorch.org/whl/cpu"
HCCN_CONF = "hccn.conf"  # the demo's /etc/hccn.conf: what the fake ports' addresses should be
JOB_LOG = "demo-job.log"  # the demo training job's stderr: a line per diagnose, check or bundle run


class NoDemoNode(ValueError):
    """The directory holds no demo node (no state file)."""


def _python_body(module: str, directory: Path) -> str:
    # The package root and the demo directory are baked in so the wrappers also work from a
    # clean environment.
    package_root = str(Path(agent.__file__).resolve().parent.parent)
    return (
        "import os, sys\n"
        f"sys.path.insert(0, {package_root!r})\n"
        f"os.environ[{DEMO_DIR_ENV!r}] = {str(directory)!r}\n"
        f"from {module} import main\n"
        "sys.exit(main())\n"
    )


def _executables() -> dict[str, tuple[str, str]]:
    """name -> (module, interpreter flags). The fakes run with -I -S: fast start-up, immune to the
    caller's PYTHON* variables. The probe interpreter needs site-packages (torch), so no flags."""
    found = {name: (module, "-IS") for name, module in TOOL_MODULES.items()}
    found[PROBE_PYTHON] = ("agent.demo.probe_python", "")
    return found


def _text_of(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None


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

    @property
    def log_root(self) -> Path:
        """Where the demo's plogs go (``debug/plog`` below it), read by the agent's log scanner."""
        return self.directory / "log"

    def tool_path(self, name: str) -> Path:
        """Path of the executable ``npu-smi``, ``hccn_tool``, ``ascend-dmi`` or ``probe-python``."""
        if name not in _executables():
            raise ValueError(f"unknown tool {name!r}; expected one of {sorted(_executables())}")
        return self.bin_dir / name

    def has_state(self) -> bool:
        return self.state_path.is_file()

    def exists(self) -> bool:
        """True when the state file and all the executables are in place."""
        return self.has_state() and all(self.tool_path(name).is_file() for name in _executables())

    def create(self, chips: int = 8, model: str = "910B3", delay_s: float = 0.0, seed: int = 0) -> DemoNode:
        """Write a fresh state (no faults, no history) and the executables; returns self."""
        if not 1 <= chips <= 16:
            raise ValueError(f"chips must be 1..16, got {chips}")
        if delay_s < 0:
            raise ValueError(f"delay_s must be >= 0, got {delay_s}")
        self.directory.mkdir(parents=True, exist_ok=True)
        state = DemoState(chips=chips, model=model, seed=seed, delay_s=delay_s, created_at=time.time())
        save_state(self.directory, state)
        self.write_executables()
        return self

    def open(self, chips: int = 8) -> DemoNode:
        """The node for an agent start: an existing state (faults, counters' history) is kept and
        only the executables are rewritten for this interpreter; a new node is created otherwise.

        DemoDirUnusable (one line) when the directory cannot be written, or when a running agent of
        another install serves it: rewriting its fake tools for this interpreter would break that agent
        the moment this install goes away."""
        try:
            if self.has_state():
                self._refuse_if_another_install_serves()
                self.write_executables()
            else:
                self.create(chips=chips)
            for directory in (self.log_root, self.directory / "state"):
                directory.mkdir(parents=True, exist_ok=True)
            if not self.hccn_conf.exists():  # kept once written: edit an address to make roce_ip fail
                self.write_hccn_conf()
        except OSError as exc:
            where = f" ({exc.filename})" if exc.filename else ""
            raise DemoDirUnusable(f"cannot use {self.directory} as a demo directory: {exc.strerror or exc}{where}; "
                                  f"give --demo-dir DIR or set {DEMO_DIR_ENV} to a directory you can write") from None
        return self

    def _refuse_if_another_install_serves(self) -> None:
        serving = running_agent(self.directory)
        if serving is None or serving[0] == os.getpid():
            return
        pid, install = serving
        # An agent that did not say which install it is: its fake tools tell, unless they are ours.
        if install == this_install() or (install is None and not self._stale_executables()):
            return
        raise DemoDirUnusable(
            f"{self.directory} is the demo node of a running agent (pid {pid}) of another npuwatch install, left as "
            f"it is; stop that agent, or give --demo-dir DIR (or set {DEMO_DIR_ENV}) for a node of this install")

    @property
    def hccn_conf(self) -> Path:
        return self.directory / HCCN_CONF

    def write_hccn_conf(self) -> None:
        """The node's hccn.conf as an operator would have written it: each port's address and netmask."""
        state = self.read()
        lines = ["# hccn.conf of the npuwatch demo node (edit an address to make roce_ip fail)"]
        for npu in range(state.chips):
            lines += [f"address_{npu}={device_ip(state, npu)}", f"netmask_{npu}=255.255.0.0"]
        tmp = self.hccn_conf.with_name(f".{HCCN_CONF}.tmp")
        tmp.write_text("\n".join(lines) + "\n", encoding="utf-8")
        os.replace(tmp, self.hccn_conf)

    def _executable_files(self) -> dict[Path, str]:
        """bin/ as this interpreter and this package would write it: path -> text."""
        python = sys.executable
        files: dict[Path, str] = {}
        for name, (module, flags) in _executables().items():
            body = _python_body(module, self.directory)
            if len(python) <= _SHEBANG_MAX and not any(ch.isspace() for ch in python):
                files[self.tool_path(name)] = f"#!{python} {flags}\n{body}" if flags else f"#!{python}\n{body}"
            else:
                sidecar = self.bin_dir / f".{name}.py"
                files[sidecar] = body
                run = " ".join(part for part in (shlex.quote(python), flags, shlex.quote(str(sidecar))) if part)
                files[self.tool_path(name)] = f'#!/bin/sh\nexec {run} "$@"\n'
        return files

    def _stale_executables(self) -> list[Path]:
        return [path for path, text in self._executable_files().items() if _text_of(path) != text]

    def write_executables(self) -> None:
        """(Re)write bin/ for the current interpreter; a file already as wanted is left untouched."""
        self.bin_dir.mkdir(parents=True, exist_ok=True)
        for path, text in self._executable_files().items():
            if _text_of(path) == text:
                continue
            tmp = path.with_name(f".{path.name}.tmp")
            tmp.write_text(text, encoding="utf-8")
            tmp.chmod(_EXECUTABLE)
            os.replace(tmp, path)

    def read(self) -> DemoState:
        if not self.has_state():
            raise NoDemoNode(f"no demo node at {self.directory}")
        return load_state(self.directory)

    @contextlib.contextmanager
    def _editing(self) -> Iterator[DemoState]:
        """Read-modify-write the state under an exclusive lock (concurrent togglers lose nothing)."""
        with open(self.directory / ".lock", "a+", encoding="utf-8") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            state = self.read()
            yield state
            save_state(self.directory, state)

    def set_fault(self, name: str, /, chip: int | None = None, **params: Any) -> Path | None:
        """Switch a fault on; for a log fault, append its plog lines and return the plog's path.

        Parameters are checked against the fault's declaration (agent.demo.faults): an unknown
        key or a bad value raises ValueError. Setting a fault that is already on with other
        parameters ends the old episode (its counts stay) and starts a new one. ``name`` is
        positional-only so that a fault may take a parameter called ``name`` (``process`` does).
        """
        spec = fault_spec(name)
        checked = check_params(name, params)
        if spec.kind == "node":
            if chip is not None:
                raise ValueError(f"fault {name!r} is node-wide; do not pass --npu")
            with self._editing() as state:
                checked.setdefault("since", demo_now(state))
                state.node_faults[name] = checked
            return None
        if spec.kind == "log":
            return self._log_event(name, chip, checked)
        with self._editing() as state:
            _check_chip(name, chip, state)
            assert chip is not None
            now = demo_now(state)
            current = state.chip_fault(chip, name)
            if current is not None:
                unchanged = {k: v for k, v in current.items() if k != "since"} == {
                    k: v for k, v in checked.items() if k != "since"}
                if unchanged and "since" not in checked:
                    return None  # already on, same parameters: the episode goes on
                end_chip_fault(state, chip, name, now)
            checked.setdefault("since", now)
            state.chip_faults.setdefault(str(chip), {})[name] = checked
        return None

    def clear_fault(self, name: str, chip: int | None = None, at: float | None = None) -> None:
        """Switch a fault off (no error when it was not on); a chip fault without ``chip``: on every chip.

        What the fault counted stays counted (agent.demo.carry); ``at`` is the demo time it ends
        (default: the demo clock).
        """
        spec = fault_spec(name)
        if spec.kind == "log":
            raise ValueError(f"fault {name!r} is a log event: it was written once, there is nothing to clear")
        with self._editing() as state:
            if spec.kind == "node":
                if chip is not None:
                    raise ValueError(f"fault {name!r} is node-wide; do not pass --npu")
                state.node_faults.pop(name, None)
                return
            if chip is not None:
                _check_chip(name, chip, state)
            ended = demo_now(state) if at is None else at
            for each in [chip] if chip is not None else range(state.chips):
                end_chip_fault(state, each, name, ended)

    def clear_all(self, at: float | None = None) -> None:
        with self._editing() as state:
            ended = demo_now(state) if at is None else at
            state.node_faults.clear()
            for chip_key, faults in list(state.chip_faults.items()):
                for name in list(faults):
                    end_chip_fault(state, int(chip_key), name, ended)

    def _log_event(self, name: str, chip: int | None, params: dict[str, Any]) -> Path:
        state = self.read()
        _check_chip(name, chip, state)
        assert chip is not None
        at = float(params.get("time", demo_now(state)))
        listed = processes_of(state, chip)
        pid = int(params.get("pid", listed[0][0] if listed else 3_325_900 + 17 * chip))
        local_ip = device_ip(state, chip)
        if name == "hccl_timeout":
            peer_ranks = [int(rank) for rank in params.get("peer_ranks", [])]
            group = params.get("group") or f"{device_ip(state, 0)}%enp_60000_0_{int((at - 3600) * 1e6)}"
            event = HcclTimeout(
                group=str(group), rank=int(params.get("rank", chip)), rank_size=int(params.get("rank_size", 8)),
                device=chip, at=at, pid=pid, local_ip=local_ip, peer_ips=tuple(params.get("peer_ips", [])),
                peer_ranks=tuple(peer_ranks), peer_state=str(params.get("peer_state", "stuck")),
                op=str(params.get("op", "AllReduce")),
            )
            lines = hccl_timeout_lines(event)
        else:
            lines = roce_cqe_lines(RoceCqe(
                device=chip, at=at, pid=pid, local_ip=local_ip, peer_ip=str(params.get("peer_ip", "29.1.9.19")),
                peer_device=int(params.get("peer_device", 1)), status=int(params.get("status", 12)),
            ))
        return append_plog(self.log_root, pid, at, lines)

    def set_subnet(self, subnet: int) -> None:
        """Give the node's RoCE device IPs their own subnet (29.<subnet>.<npu>.<10 + npu>)."""
        if not 1 <= subnet <= 254:
            raise ValueError(f"subnet must be 1..254, got {subnet}")
        with self._editing() as state:
            state.subnet = subnet
        self.write_hccn_conf()

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


def _check_chip(name: str, chip: int | None, state: DemoState) -> None:
    """A chip or log fault needs a chip that the node has (one-line message for the CLI)."""
    if chip is None:
        raise ValueError(f"fault {name!r} applies to one chip: pass --npu N (0..{state.chips - 1})")
    if not 0 <= chip < state.chips:
        raise ValueError(f"fault {name!r}: --npu {chip} is not a chip of this node (0..{state.chips - 1})")


def torch_installed() -> bool:
    """Whether this interpreter (the demo's probe interpreter runs it) can import torch; torch is not imported."""
    return importlib.util.find_spec("torch") is not None


def demo_overrides(demo_dir: Path, bin_dir: Path, config: Config, *, torch_found: bool | None = None) -> dict[str, Any]:
    """Config keys the demo replaces or extends (dotted, for ``agent.core.config.apply_overrides``).

    ``config`` is the operator's config (agent.core.config.Config): the demo adds its log
    directory to ``collectors.hccl_logs.paths`` rather than replacing them, and turns the probes
    off (one log line says how to get them) when torch is missing here, since the demo's probes
    run under this interpreter. Logs one line for each of the two.
    """
    log_root = str(demo_dir / "log")
    job_logs = str(demo_dir / "log" / "job" / "*.log")
    globs = [str(pattern) for pattern in config.collectors.hccl_logs.globs]
    configured = [str(path) for path in config.collectors.hccl_logs.paths]
    overrides: dict[str, Any] = {
        "collectors.npu_smi.path": str(bin_dir / "npu-smi"),
        "collectors.hccn_tool.path": str(bin_dir / "hccn_tool"),
        "collectors.ascend_dmi.path": str(bin_dir / "ascend-dmi"),
        "collectors.hccn_tool.hccn_conf": str(demo_dir / HCCN_CONF),
        "collectors.hccl_logs.paths": configured if log_root in configured else [*configured, log_root],
        # the demo job's stderr (agent.demo.fleet writes its EI0002 blocks there)
        "collectors.hccl_logs.globs": globs if job_logs in globs else [*globs, job_logs],
        "state_dir": str(demo_dir / "state"),
        # The demo's chips are its fake tools': a real libdcmi.so would describe other chips. A library
        # configured by path (a fake one, in the tests) is kept, with its lock beside the node's state.
        "collectors.dcmi.enabled": config.collectors.dcmi.enabled if config.collectors.dcmi.library else False,
        "collectors.dcmi.lock_file": str(demo_dir / "state" / "dcmi.lock"),
        "probes.lock_file": str(demo_dir / "state" / "probe.lock"),
        # The demo's probes run on the CPU, under the demo's probe interpreter (this Python, with
        # the node's probe faults), and often, so their panels fill within minutes. Its AI Core
        # load is synthetic, so only a listed NPU process (the `process` fault) holds probes back.
        "probes.python": str(bin_dir / PROBE_PYTHON),
        "probes.backend": "cpu",
        "probes.idle_aicore_threshold": 1.0,
        # One node with a few processes: top's process list shows them (the README's picture).
        "collectors.npu_smi.per_process_metrics": True,
    }
    node = DemoNode(demo_dir)
    if not config.expected_chips and node.has_state():
        # The node's own chip count, exported as npuwatch_expected_chips: NPUChipMissing fires after `vanish`.
        overrides["expected_chips"] = node.read().chips
    for probe, schedule in DEMO_PROBE_SCHEDULE.items():
        overrides[f"probes.{probe}.cron"] = None
        overrides[f"probes.{probe}.jitter"] = 0.0
        overrides[f"probes.{probe}.first_run"] = schedule["first_run"]
        overrides[f"probes.{probe}.interval"] = schedule["interval"]
    if log_root not in configured:
        log.info("demo: HCCL/CANN logs are read from %s as well as the configured %s", log_root,
                 ", ".join(configured) or "(none)")
    if config.probes.enabled and not (torch_installed() if torch_found is None else torch_found):
        overrides["probes.enabled"] = False
        log.info("demo: GEMM and all-reduce probes are off: torch is not installed for %s (get them with "
                 "`%s -m %s`)", sys.executable, sys.executable, CPU_TORCH_HINT)
    return overrides


def open_demo(config: Config, demo_dir: Path, chips: int = 8) -> tuple[dict[str, Any], dict[str, str]]:
    """(the config overrides for the demo node in ``demo_dir``, the fakes' environment), for the one-shot
    commands (diagnose, check, bundle); the node is created when absent and keeps its faults otherwise."""
    demo = DemoNode(demo_dir).open(chips=chips)
    # A healthy job's log line, so the log checks have a recent file to read on a demo without a log fault.
    append_job_log(demo.log_root, [f"{plog_timestamp(time.time())} demo training job: step running, "
                                   "no HCCL errors"], name=JOB_LOG)
    return demo_overrides(demo_dir, demo.bin_dir, config), demo.env()


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
        cmd.add_argument("fault", choices=sorted(FAULTS if action == "set" else set(FAULTS) - LOG_FAULTS))
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
