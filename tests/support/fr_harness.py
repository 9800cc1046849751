"""Real flight-recorder dumps from a 4-rank ``torch.distributed`` job on CPU/gloo.

``run_scenario("complete" | "hang" | "desync", out_dir)`` starts one subprocess per rank (this file run
as ``python fr_harness.py worker ...``), each in its own session so a stuck rank can be killed with its
process group, and waits for all of them under a deadline. The ranks rendezvous over TCP on a free
127.0.0.1 port, then run N collectives on the default group:

- ``complete``: every rank runs N all_reduces;
- ``hang``: the last rank sleeps past the timeout instead of entering collective N; the others enter
  it and time out;
- ``desync``: the last rank calls broadcast at collective N while the others call all_reduce; all
  time out.

Each rank then writes its dump twice, ``json/trace_<rank>.json`` (``_dump_fr_trace_json``) and
``pickle/trace_<rank>`` (``_dump_fr_trace``), and ``status_<rank>.json`` with the error its collective
raised.

What switches the recorder on for gloo in torch 2.13 (read from the installed torch):
``FlightRecorder<c10::Event>`` (torch/include/torch/csrc/distributed/c10d/FlightRecorder.hpp) sizes its
ring buffer from ``TORCH_FR_BUFFER_SIZE`` (alias ``TORCH_NCCL_TRACE_BUFFER_SIZE``) and ProcessGroupGloo
records into it. The header's default is 2000, so gloo records even with neither variable set (checked:
3 entries after 3 all_reduces); ``TORCH_FR_BUFFER_SIZE=0`` turns it off (empty pg_config and pg_status).
The harness sets 200. The Python-side default of "0" in distributed_c10d.py applies only to the
TorchComms path (``FlightRecorderHook``), not to ProcessGroupGloo. The dumps come from
``torch._C._distributed_c10d._dump_fr_trace`` (pickle bytes) and ``_dump_fr_trace_json`` (JSON bytes).
libtorch_cpu.so and libtorch_python.so name no ``*_DUMP_ON_TIMEOUT`` switch (only
``TORCH_FR_DUMP_TEMP_FILE`` / ``TORCH_FR_DUMP_DYNAMIC_FILE_NAME`` for where a dump goes), so nothing dumps a
gloo rank on timeout: each rank here dumps itself after its collective returns or raises.
The process group is created with a 60 s timeout (rendezvous on two busy cores can be slow) and
then shortened with ``torch.distributed.distributed_c10d._set_pg_timeout`` for the collectives.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

SCENARIOS = ("complete", "hang", "desync")
WORLD_SIZE = 4
COLLECTIVES = 5
PG_TIMEOUT_MS = 5000  # long enough that a rank starved on a loaded machine does not time out early
_HUNG_EXTRA_S = 1.5
_RENDEZVOUS_TIMEOUT_S = 60


@dataclass(frozen=True)
class ScenarioRun:
    scenario: str
    world_size: int
    collectives: int  # N: the collective the fault is injected at (the last one)
    faulty_rank: int
    pg_timeout_ms: int
    out_dir: Path
    returncodes: tuple[int | None, ...]
    errors: tuple[str | None, ...]  # per rank: the exception its collective raised

    def json_dump(self, rank: int) -> Path:
        return self.out_dir / "json" / f"trace_{rank}.json"

    def pickle_dump(self, rank: int) -> Path:
        return self.out_dir / "pickle" / f"trace_{rank}"

    def log(self, rank: int) -> str:
        return (self.out_dir / f"rank_{rank}.log").read_text(errors="replace")


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _kill_group(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
    process.wait(timeout=10)


_RENDEZVOUS_FAILURES = ("DistNetworkError", "Address already in use", "EADDRINUSE")


def run_scenario(scenario: str, out_dir: Path, *, world_size: int = WORLD_SIZE, collectives: int = COLLECTIVES,
                 pg_timeout_ms: int = PG_TIMEOUT_MS, deadline_s: float = 90.0) -> ScenarioRun:
    """Run one scenario to completion (or kill it at ``deadline_s``) and describe what it left behind.

    The free port is picked before the ranks bind it; on a busy machine another process may take it
    first and the job never forms. That is the harness's failure, not the scenario's: it is run once
    more on a new port (in a fresh directory), and a second failure is reported as it is.
    """
    if scenario not in SCENARIOS:
        raise ValueError(f"unknown scenario {scenario!r}; one of {SCENARIOS}")
    run = _run_once(scenario, out_dir, world_size=world_size, collectives=collectives,
                    pg_timeout_ms=pg_timeout_ms, deadline_s=deadline_s)
    logs = "".join(run.log(rank) for rank in range(world_size))
    if any(marker in logs for marker in _RENDEZVOUS_FAILURES):
        shutil.rmtree(out_dir, ignore_errors=True)
        run = _run_once(scenario, out_dir, world_size=world_size, collectives=collectives,
                    pg_timeout_ms=pg_timeout_ms, deadline_s=deadline_s)
    return run


def _run_once(scenario: str, out_dir: Path, *, world_size: int, collectives: int, pg_timeout_ms: int,
              deadline_s: float) -> ScenarioRun:
    out_dir.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "TORCH_FR_BUFFER_SIZE": "200", "OMP_NUM_THREADS": "1", "GLOO_SOCKET_IFNAME": "lo",
           "PYTHONUNBUFFERED": "1"}
    port = _free_port()
    processes: list[subprocess.Popen[bytes]] = []
    try:
        for rank in range(world_size):
            argv = [sys.executable, str(Path(__file__).resolve()), "worker", "--scenario", scenario,
                    "--rank", str(rank), "--world-size", str(world_size), "--port", str(port),
                    "--collectives", str(collectives), "--timeout-ms", str(pg_timeout_ms), "--out", str(out_dir)]
            with (out_dir / f"rank_{rank}.log").open("wb") as log:
                processes.append(subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, env=env,
                                                  start_new_session=True))
        end = time.monotonic() + deadline_s
        for process in processes:
            try:
                process.wait(timeout=max(0.1, end - time.monotonic()))
            except subprocess.TimeoutExpired:
                break
    finally:
        for process in processes:
            _kill_group(process)
    errors = []
    for rank in range(world_size):
        status = out_dir / f"status_{rank}.json"
        errors.append(json.loads(status.read_text())["error"] if status.is_file() else "no status written")
    return ScenarioRun(scenario=scenario, world_size=world_size, collectives=collectives,
                       faulty_rank=world_size - 1, pg_timeout_ms=pg_timeout_ms, out_dir=out_dir,
                       returncodes=tuple(p.returncode for p in processes), errors=tuple(errors))


# --- the worker (one per rank) ---------------------------------------------------------------------------


def _worker(args: argparse.Namespace) -> None:
    from datetime import timedelta

    import torch
    import torch.distributed as dist
    from torch._C._distributed_c10d import _dump_fr_trace, _dump_fr_trace_json
    from torch.distributed.distributed_c10d import _set_pg_timeout

    rank, faulty = args.rank, args.world_size - 1
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{args.port}", rank=rank,
                            world_size=args.world_size, timeout=timedelta(seconds=_RENDEZVOUS_TIMEOUT_S))
    _set_pg_timeout(timedelta(milliseconds=args.timeout_ms))
    tensor = torch.ones(3, 4)
    error = None
    try:
        for seq in range(1, args.collectives + 1):
            if seq == args.collectives and rank == faulty and args.scenario == "hang":
                time.sleep(args.timeout_ms / 1000 + _HUNG_EXTRA_S)
                break
            if seq == args.collectives and rank == faulty and args.scenario == "desync":
                dist.broadcast(tensor, src=0)
            else:
                dist.all_reduce(tensor)
    except RuntimeError as failure:
        error = str(failure)
    out = Path(args.out)
    (out / "json").mkdir(exist_ok=True)
    (out / "pickle").mkdir(exist_ok=True)
    (out / "json" / f"trace_{rank}.json").write_bytes(_dump_fr_trace_json())
    (out / "pickle" / f"trace_{rank}").write_bytes(_dump_fr_trace())
    (out / f"status_{rank}.json").write_text(json.dumps({"rank": rank, "error": error}))
    sys.stdout.flush()
    # Skip destroy_process_group: after a timeout it can block on peers that are already gone.
    os._exit(0)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    worker = sub.add_parser("worker")
    worker.add_argument("--scenario", choices=SCENARIOS, required=True)
    worker.add_argument("--rank", type=int, required=True)
    worker.add_argument("--world-size", type=int, required=True)
    worker.add_argument("--port", type=int, required=True)
    worker.add_argument("--collectives", type=int, required=True)
    worker.add_argument("--timeout-ms", type=int, required=True)
    worker.add_argument("--out", required=True)
    run = sub.add_parser("run", help="run one scenario and print where its dumps are")
    run.add_argument("scenario", choices=SCENARIOS)
    run.add_argument("out")
    args = parser.parse_args()
    if args.command == "worker":
        _worker(args)
    else:
        result = run_scenario(args.scenario, Path(args.out))
        print(json.dumps({"returncodes": result.returncodes, "errors": result.errors, "out": str(result.out_dir)},
                         indent=2))


if __name__ == "__main__":
    main()
