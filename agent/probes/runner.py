"""Run the GEMM and all-reduce probe workers in child processes and judge the outcome.

The agent never imports torch: each probe is a worker script (collectors/probes/) run by
the configured probe interpreter, one process per rank, each in its own session so that
the watchdog can kill the rank *and everything it started* (os.killpg, SIGTERM then
SIGKILL). Children are always reaped. A run killed at the deadline still knows which
stage hung, from the ``@npuwatch-stage`` lines the ranks write to stderr: ``connect``
(the process group never formed) or ``exec`` (the collective never finished). Besides the
overall ``deadline_s``, an optional ``stall_s`` kills a run whose ranks sat in connect or
exec that long without reporting progress: HCCL's own timeouts cannot go below 120 s
(connect) and 68 s (exec), and this limit does not have to wait out a slow torch import.

Outcomes stay apart so a broken environment is never reported as broken hardware:
``pass``; ``fail`` (wrong result, or below a threshold, or a collective broke);
``timeout`` (with the stage); ``skipped`` (another probe holds the lock, or the devices are
busy); ``error`` (could not run: torch missing, torch_npu import error, no devices).
"""

from __future__ import annotations

import dataclasses
import itertools
import os
import socket
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

import collectors.probes
from agent.probes.lock import ProbeBusy, ProbeLock
from agent.probes.peaks import lookup_peak
from agent.probes.records import (
    AllreduceMeasurement,
    EventHandler,
    GemmMeasurement,
    ProbeResult,
    ProbeSettings,
    RankReport,
    skipped_result,
)
from agent.probes.workers import STAGE_ORDER, run_workers

_WORKER_DIR = Path(collectors.probes.__file__).resolve().parent
# HCCL rejects values outside these ranges (CANN env var reference); clamp instead of failing.
_HCCL_CONNECT_RANGE = (120, 7200)
_HCCL_EXEC_RANGE = (68, 17340)
# --------------------------------------------------------------------------- helpers
_tags = itertools.count()


def _worker_env(settings: ProbeSettings, backend: str) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONUNBUFFERED"] = "1"
    if backend in ("cpu", "cuda"):
        env["TORCH_DEVICE_BACKEND_AUTOLOAD"] = "0"
    if backend in ("npu", "auto"):
        env["HCCL_CONNECT_TIMEOUT"] = str(_clamp(int(settings.connect_timeout_s), *_HCCL_CONNECT_RANGE))
        env["HCCL_EXEC_TIMEOUT"] = str(_clamp(int(settings.exec_timeout_s), *_HCCL_EXEC_RANGE))
    env.update(settings.extra_env)
    return env


def _clamp(value: int, low: int, high: int) -> int:
    return max(low, min(high, value))


def _common_args(settings: ProbeSettings) -> list[str]:
    args = ["--tag", settings.tag or f"npuwatch-probe-{os.getpid()}-{next(_tags)}"]
    if settings.warmup is not None:
        args += ["--warmup", str(settings.warmup)]
    if settings.warmup_s is not None:
        args += ["--warmup-seconds", str(settings.warmup_s)]
    if settings.iterations is not None:
        args += ["--iterations", str(settings.iterations)]
    if settings.repeats is not None:
        args += ["--repeats", str(settings.repeats)]
    return args


def _timeout_stage(reports: Sequence[RankReport]) -> str:
    """The stage a killed run hung in: the least advanced rank that had not finished."""
    pending = [r for r in reports if r.stage != "done"] or list(reports)
    least = min((STAGE_ORDER[r.stage] for r in pending), default=0)
    return "exec" if least >= STAGE_ORDER["exec"] else "connect"


def _tail(report: RankReport) -> str:
    return " | ".join(report.stderr_tail[-3:])


def _classify_workers(reports: Sequence[RankReport],
                      killed_because: str | None) -> tuple[str, str | None, str] | None:
    """(outcome, stage, message) when some rank did not succeed; None when all reported ok."""
    if killed_because is not None:
        stage = _timeout_stage(reports)
        return "timeout", stage, f"{killed_because} in stage {stage}"
    problems: list[tuple[int, str, str | None, str]] = []  # (priority, outcome, stage, message)
    for report in reports:
        result = report.result
        if report.killed and (result is None or result.get("status") == "ok"):
            continue  # stopped by us because another rank failed: not its own verdict
        if result is None:
            outcome = "fail" if report.stage == "exec" else "error"
            problems.append((1 if outcome == "error" else 3, outcome, None,
                             f"rank {report.index} exited {report.returncode} without a result in stage "
                             f"{report.stage}: {_tail(report)}"))
            continue
        status = result.get("status")
        if status == "ok":
            continue
        stage = str(result.get("stage", "setup"))
        message = f"rank {report.index}: {result.get('message', status)}"
        if status == "timeout":
            problems.append((2, "timeout", "exec" if stage == "exec" else "connect", message))
        elif status == "fail":
            problems.append((3, "fail", None, message))
        else:
            problems.append((1, "error", None, message))
    if not problems:
        if any(r.result is None for r in reports):
            return "error", None, "a rank was stopped without a result"
        return None
    # An environment error explains the others (peers of a rank that could not start
    # break too), so it wins; then timeouts, then failures.
    problems.sort(key=lambda p: p[0])
    _, worst_outcome, worst_stage, worst_message = problems[0]
    return worst_outcome, worst_stage, worst_message


def _result_backend(reports: Sequence[RankReport]) -> str | None:
    for report in reports:
        if report.result and report.result.get("backend"):
            return str(report.result["backend"])
    return None


def _notes(reports: Sequence[RankReport]) -> list[str]:
    notes: list[str] = []
    for report in reports:
        for note in (report.result or {}).get("notes", []):
            if note not in notes:
                notes.append(str(note))
    return notes


def run_locked(probe: str, settings: ProbeSettings, body: Callable[[], ProbeResult]) -> ProbeResult:
    """``body()`` under the probe lock (skipped when another probe holds it), or without it."""
    if not settings.use_lock:
        return body()
    lock = ProbeLock(settings.lock_path)
    try:
        lock.acquire()
    except ProbeBusy as exc:
        return skipped_result(probe, str(exc))
    except OSError as exc:
        return ProbeResult(probe=probe, outcome="error", started_at=time.time(), duration_s=0.0,
                           message=f"cannot take the probe lock {lock.path}: {exc}")
    try:
        return body()
    finally:
        lock.release()


# --------------------------------------------------------------------------- GEMM


def run_gemm(settings: ProbeSettings, on_event: EventHandler | None = None) -> ProbeResult:
    """Run the GEMM probe on every selected device (under the probe lock)."""
    return run_locked("gemm", settings, lambda: _run_gemm(settings, on_event))


def run_single_worker(probe: str, script: str, args: Sequence[str], settings: ProbeSettings,
                      on_event: EventHandler | None, *,
                      deadline_s: float | None = None) -> tuple[ProbeResult, dict[str, Any]]:
    """Run a one-process worker (``script`` in collectors/probes) with the common flags and
    ``--devices``; returns the result (outcome ``pass`` unless the worker's run decided
    otherwise) and the worker's JSON payload (empty when it left none) for the caller to judge."""
    started = time.time()
    argv = [settings.python, str(_WORKER_DIR / script), "--backend", settings.backend, *_common_args(settings),
            *args]
    if settings.devices is not None and "--devices" not in args:
        argv += ["--devices", ",".join(str(d) for d in settings.devices)]
    commands = [(argv, _worker_env(settings, settings.backend))]
    reports, killed_because = run_workers(commands, deadline_s or settings.deadline_s, settings.term_grace_s,
                                           on_event, settings.stall_s)
    result = ProbeResult(probe=probe, outcome="pass", started_at=started, duration_s=time.time() - started,
                         backend=_result_backend(reports), ranks=reports, warnings=_notes(reports))
    problem = _classify_workers(reports, killed_because)
    if problem is not None:
        result.outcome, result.stage, result.message = problem
    return result, reports[0].result or {}


def _run_gemm(settings: ProbeSettings, on_event: EventHandler | None) -> ProbeResult:
    args = []
    if settings.gemm_size is not None:
        args += ["--size", str(settings.gemm_size)]
    if settings.gemm_dtypes:
        args += ["--dtypes", ",".join(settings.gemm_dtypes)]
    result, payload = run_single_worker("gemm", "gemm.py", args, settings, on_event)
    result.gemm = [_gemm_measurement(m, settings) for m in payload.get("measurements", [])]
    if result.outcome == "pass":
        _judge_gemm(result, settings)
    return result


def _gemm_measurement(raw: Mapping[str, Any], settings: ProbeSettings) -> GemmMeasurement:
    device = int(raw["device"])
    npu, chip = settings.chip_map.get(device, (device, 0))
    model = settings.model or str(raw.get("model", ""))
    peak = lookup_peak(model, str(raw["dtype"]), settings.peaks)
    flops = float(raw["flops"])
    return GemmMeasurement(
        device=device, npu=npu, chip=chip, model=model, dtype=str(raw["dtype"]), size=int(raw["size"]),
        iterations=int(raw["iterations"]), seconds=float(raw["seconds"]), flops=flops,
        correct=bool(raw["correct"]), residual_ratio=float(raw["residual_ratio"]),
        peak_flops=peak.flops if peak else None, peak_basis=peak.basis if peak else None,
        efficiency=flops / peak.flops if peak else None)


def _judge_gemm(result: ProbeResult, settings: ProbeSettings) -> None:
    if not result.gemm:
        result.outcome, result.message = "error", "the worker measured no device"
        return
    wrong = [m for m in result.gemm if not m.correct]
    if wrong:
        result.outcome = "fail"
        result.message = "wrong product on " + ", ".join(
            f"device {m.device} {m.dtype} (residual {m.residual_ratio:.3g}x tolerance)" for m in wrong)
        return
    slow, warn = [], []
    for m in result.gemm:
        if m.efficiency is None or m.peak_basis != "measured":
            continue
        if m.efficiency < settings.min_efficiency:
            slow.append(m)
        elif settings.warn_efficiency is not None and m.efficiency < settings.warn_efficiency:
            warn.append(m)
    if slow:
        result.outcome = "fail"
        result.message = f"below {settings.min_efficiency:.0%} of the expected peak: " + ", ".join(
            f"device {m.device} {m.dtype} at {m.efficiency:.0%}" for m in slow)
        return
    result.warnings += [f"device {m.device} {m.dtype} at {m.efficiency:.0%} of the expected peak"
                        for m in warn if m.efficiency is not None]
    result.message = f"{len(result.gemm)} measurement(s) correct"


# --------------------------------------------------------------------------- all-reduce


def run_allreduce(settings: ProbeSettings, scope: Literal["node", "cluster"] = "node", *, nnodes: int = 1,
                  node_rank: int = 0, master: str | None = None,
                  on_event: EventHandler | None = None) -> ProbeResult:
    """Run the all-reduce probe: one rank per device on this node, joined with ``nnodes - 1``
    other nodes through rank 0's TCPStore at ``master`` (HOST:PORT) in cluster scope.

    Every node of a cluster run must use the same number of ranks per node.
    """
    return run_locked("allreduce", settings,
                   lambda: _run_allreduce(settings, scope, nnodes=nnodes, node_rank=node_rank, master=master,
                                          on_event=on_event))


def _parse_master(master: str) -> tuple[str, int]:
    host, sep, port = master.rpartition(":")
    if not sep or not host or not port.isdigit():
        raise ValueError(f"--master must be HOST:PORT, got {master!r}")
    return host.strip("[]"), int(port)


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _discover(settings: ProbeSettings) -> dict[str, Any]:
    """Resolve ``auto`` and count devices by asking the probe interpreter (it has torch; we don't)."""
    argv = [settings.python, str(_WORKER_DIR / "_common.py"), "--discover", "--backend", settings.backend]
    reports, killed_because = run_workers([(argv, _worker_env(settings, settings.backend))],
                                           min(settings.deadline_s, 120.0), settings.term_grace_s, None)
    report = reports[0]
    if killed_because is not None:
        return {"status": "error", "message": "device discovery hung"}
    if report.result is None:
        return {"status": "error", "message": f"device discovery failed: {_tail(report)}"}
    return report.result


def _run_allreduce(settings: ProbeSettings, scope: str, *, nnodes: int, node_rank: int, master: str | None,
                   on_event: EventHandler | None) -> ProbeResult:
    started = time.time()

    def error(message: str, backend: str | None = None) -> ProbeResult:
        return ProbeResult(probe="allreduce", outcome="error", started_at=started,
                           duration_s=time.time() - started, message=message, backend=backend, scope=scope)

    if scope not in ("node", "cluster"):
        return error(f"unknown scope {scope!r}")
    if scope == "node":
        nnodes, node_rank = 1, 0
    if not 0 <= node_rank < nnodes:
        return error(f"node rank {node_rank} outside 0..{nnodes - 1}")
    backend = settings.backend
    devices = settings.devices
    if devices is None and backend == "cpu":
        devices = tuple(range(settings.cpu_ranks))
    if devices is None:
        found = _discover(settings)
        if found.get("status") != "ok":
            return error(str(found.get("message", "device discovery failed")))
        backend = found["backend"]
        count = settings.cpu_ranks if backend == "cpu" else int(found["device_count"])
        devices = tuple(range(count))
    if not devices:
        return error("no devices to probe", backend)
    if scope == "cluster":
        if master is None:
            return error("cluster scope needs --master HOST:PORT")
        try:
            master_addr, master_port = _parse_master(master)
        except ValueError as exc:
            return error(str(exc))
    else:
        master_addr, master_port = "127.0.0.1", _free_port()

    local = len(devices)
    world = nnodes * local
    if world < 2:
        # One rank sums with nobody: the "bandwidth" would be a local no-op (busbw 0).
        return dataclasses.replace(skipped_result("allreduce", f"{world} device: an all-reduce needs at least 2"),
                                   started_at=started, backend=backend, scope=scope)
    env = _worker_env(settings, backend)
    if scope == "node" and backend == "cpu":
        env.setdefault("GLOO_SOCKET_IFNAME", "lo")  # every rank is local; don't guess an interface
    base = [settings.python, str(_WORKER_DIR / "allreduce.py"), "--backend", backend,
            "--connect-timeout", str(settings.connect_timeout_s),
            "--exec-timeout", str(settings.exec_timeout_s), *_common_args(settings)]
    if settings.allreduce_bytes is not None:
        base += ["--size-bytes", str(settings.allreduce_bytes)]
    commands = []
    for local_rank, device in enumerate(devices):
        rank_env = dict(env, RANK=str(node_rank * local + local_rank), WORLD_SIZE=str(world),
                        LOCAL_RANK=str(local_rank), LOCAL_WORLD_SIZE=str(local), MASTER_ADDR=master_addr,
                        MASTER_PORT=str(master_port))
        commands.append(([*base, "--device", str(device)], rank_env))
    reports, killed_because = run_workers(commands, settings.deadline_s, settings.term_grace_s, on_event,
                                           settings.stall_s)

    result = ProbeResult(probe="allreduce", outcome="pass", started_at=started,
                         duration_s=time.time() - started, backend=_result_backend(reports) or backend,
                         scope=scope, ranks=reports, warnings=_notes(reports))
    problem = _classify_workers(reports, killed_because)
    if problem is not None:
        result.outcome, result.stage, result.message = problem
        return result
    _judge_allreduce(result, reports, scope, settings)
    return result


def _judge_allreduce(result: ProbeResult, reports: Sequence[RankReport], scope: str,
                     settings: ProbeSettings) -> None:
    payloads = sorted((r.result for r in reports if r.result), key=lambda p: int(p.get("rank", 0)))
    first = payloads[0]
    measurement = AllreduceMeasurement(
        scope=scope, world_size=int(first["world_size"]), size_bytes=int(first["size_bytes"]),
        iterations=int(first["iterations"]), seconds_per_iteration=float(first["seconds_per_iteration"]),
        algbw_bytes_per_second=float(first["algbw_bytes_per_second"]),
        busbw_bytes_per_second=float(first["busbw_bytes_per_second"]),
        correct=all(bool(p.get("correct")) for p in payloads))
    result.allreduce = measurement
    busbw = measurement.busbw_bytes_per_second
    if not measurement.correct:
        bad = [str(p.get("rank")) for p in payloads if p.get("local_mismatches")]
        result.outcome = "fail"
        result.message = (f"wrong all-reduce sums ({int(first.get('failed_ranks', 0))} rank(s) saw mismatches"
                          + (f"; here: rank {', '.join(bad)}" if bad else "") + ")")
    elif settings.min_busbw is not None and busbw < settings.min_busbw:
        result.outcome = "fail"
        result.message = f"busbw {busbw / 1e9:.2f} GB/s below {settings.min_busbw / 1e9:.2f} GB/s"
    else:
        if settings.warn_busbw is not None and busbw < settings.warn_busbw:
            result.warnings.append(f"busbw {busbw / 1e9:.2f} GB/s below {settings.warn_busbw / 1e9:.2f} GB/s")
        result.message = f"{measurement.world_size} ranks, busbw {busbw / 1e9:.3f} GB/s, sums correct"


