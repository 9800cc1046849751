"""Shared helpers of the probe workers: backend choice, timers, stage reports, test hooks.

The workers (``gemm.py``, ``allreduce.py``, ``membw.py``, ``h2d.py``, ``p2p.py``,
``sustained_gemm.py``) run under the *probe* interpreter (on NPU nodes the training
environment's Python, 3.8 or later), so this module imports only the standard library at
import time. torch is imported by ``load_backend`` so that a missing or broken torch
becomes a reported setup error, never a traceback.

Protocol with the runner (agent/probes/runner.py):
- stdout carries exactly one JSON object, the result (``emit_result``);
- stderr carries stage reports, one line each, ``@npuwatch-stage {"stage": ..., "rank": ...}``,
  so that a run killed at the deadline still tells which stage hung; a report with a
  ``progress`` key marks finished work inside a stage (the runner's no-progress watchdog);
- exit status 0 (ok), 1 (fail), 2 (timeout), 3 (error).

Test hooks (environment variables the workers honour):
- ``NPUWATCH_PROBE_STALL=STAGE[:RANK]`` makes the rank (every rank without ``:RANK``) sleep
  for ever on entering STAGE (``connect`` or ``exec``);
- ``NPUWATCH_PROBE_CORRUPT=PROBE[:RANK]`` corrupts one element of the result of PROBE
  (``gemm``, ``allreduce``, ``membw``, ``h2d``, ``p2p`` or ``sustained_gemm``) before it is checked;
- ``NPUWATCH_PROBE_SLOW_PAIR=SRC:DST:SECONDS`` makes the p2p worker sleep that long after each
  timed copy from device SRC to device DST, as a degraded link would take.

Timing recipe shared by every worker: a warm-up of at least ``--warmup`` iterations and at
least ``--warmup-seconds`` (clocks ramp up under load), then ``--repeats`` timed loops of
``--iterations`` each; the fastest loop is the measurement (``best_of``).

Run as a script with ``--discover`` it prints the backend ``auto`` resolves to and the
number of devices, which the runner needs before it can spawn one rank per device.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import platform
import sys
import time
from collections.abc import Callable
from typing import Any

__all__ = [
    "BACKENDS",
    "EXIT_CODES",
    "STAGE_PREFIX",
    "Backend",
    "Counts",
    "SetupError",
    "add_timing_arguments",
    "best_of",
    "collective_failure",
    "corruption_requested",
    "emit_result",
    "load_backend",
    "looks_like_timeout",
    "report_stage",
    "resolve_counts",
    "run_probe",
    "select_devices",
    "slow_pair_delay",
    "stall_if_requested",
    "warm_up",
    "worker_main",
]

BACKENDS = ("auto", "npu", "cuda", "cpu")
DIST_BACKENDS = {"npu": "hccl", "cuda": "nccl", "cpu": "gloo"}
STAGE_PREFIX = "@npuwatch-stage "
STALL_ENV = "NPUWATCH_PROBE_STALL"
CORRUPT_ENV = "NPUWATCH_PROBE_CORRUPT"
SLOW_PAIR_ENV = "NPUWATCH_PROBE_SLOW_PAIR"
# Set by an ``auto`` worker that re-executes itself after torch_npu failed to import:
# the half-imported torch of the first attempt cannot be reused in the same process.
NO_NPU_ENV = "NPUWATCH_PROBE_NO_NPU"
NPU_NOTE_ENV = "NPUWATCH_PROBE_NPU_NOTE"
EXIT_CODES = {"ok": 0, "fail": 1, "timeout": 2, "error": 3}


class SetupError(RuntimeError):
    """The probe cannot run here (no torch, no torch_npu, no devices): an environment problem."""


def emit_result(result: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(result, sort_keys=True) + "\n")
    sys.stdout.flush()


def report_stage(stage: str, rank: int = 0, **extra: Any) -> None:
    """Tell the runner which stage this rank entered (``setup``, ``connect``, ``exec``, ``done``)."""
    payload = {"stage": stage, "rank": rank, "time": time.time(), **extra}
    sys.stderr.write(STAGE_PREFIX + json.dumps(payload, sort_keys=True) + "\n")
    sys.stderr.flush()


def _hook_matches(env_name: str, wanted: str, rank: int) -> bool:
    spec = os.environ.get(env_name, "").strip()
    if not spec:
        return False
    name, _, who = spec.partition(":")
    if name != wanted:
        return False
    return not who or int(who) == rank


def stall_if_requested(stage: str, rank: int = 0) -> None:
    """Test hook: hang here for ever, as a dead peer or a wedged device would."""
    if _hook_matches(STALL_ENV, stage, rank):
        while True:
            time.sleep(3600)


def corruption_requested(probe: str, rank: int = 0) -> bool:
    return _hook_matches(CORRUPT_ENV, probe, rank)


def slow_pair_delay(src: int, dst: int) -> float:
    """Test hook: seconds to sleep after each timed copy from ``src`` to ``dst`` (0: none)."""
    spec = os.environ.get(SLOW_PAIR_ENV, "").strip()
    if not spec:
        return 0.0
    try:
        want_src, want_dst, seconds = spec.split(":")
        if (int(want_src), int(want_dst)) == (src, dst):
            return float(seconds)
    except ValueError:
        raise SetupError(f"{SLOW_PAIR_ENV}={spec!r}: expected SRC:DST:SECONDS") from None
    return 0.0


def looks_like_timeout(exc: BaseException) -> bool:
    text = f"{type(exc).__name__} {exc}".lower()
    return "timeout" in text or "timed out" in text


def collective_failure(exc: BaseException, stage: str) -> dict[str, str]:
    """The result fields of a collective worker that raised in ``stage``.

    Hung peers surface as timeouts; anything else in exec is the collective breaking (a hardware or network
    fault), while a failure to connect is usually configuration.
    """
    status = "timeout" if looks_like_timeout(exc) else ("fail" if stage == "exec" else "error")
    return {"status": status, "stage": stage, "message": f"{type(exc).__name__}: {exc}"}


class _WallTimer:
    """cpu: the ops are synchronous, so the wall clock is the measurement."""

    def __init__(self) -> None:
        self._t0 = 0.0

    def start(self) -> None:
        self._t0 = time.perf_counter()

    def stop(self) -> float:
        return time.perf_counter() - self._t0


class _EventTimer:
    """cuda / npu: device events bracket the queued work; host time would include launch gaps."""

    def __init__(self, device_module: Any) -> None:
        self._start = device_module.Event(enable_timing=True)
        self._end = device_module.Event(enable_timing=True)

    def start(self) -> None:
        self._start.record()

    def stop(self) -> float:
        self._end.record()
        self._end.synchronize()
        return float(self._start.elapsed_time(self._end)) / 1000.0


class Backend:
    """One of npu / cuda / cpu behind a common face: devices, sync, timers, dist backend."""

    def __init__(self, name: str, torch: Any, notes: list[str]) -> None:
        self.name = name
        self.torch = torch
        self.notes = notes
        self.dist_backend = DIST_BACKENDS[name]
        self.module: Any = getattr(torch, name) if name != "cpu" else None

    def device_count(self) -> int:
        return 1 if self.module is None else int(self.module.device_count())

    def device(self, index: int) -> Any:
        return self.torch.device("cpu") if self.module is None else self.torch.device(self.name, index)

    def set_device(self, index: int) -> None:
        if self.module is not None:
            self.module.set_device(index)

    def synchronize(self) -> None:
        if self.module is not None:
            self.module.synchronize()

    def synchronize_device(self, index: int) -> None:
        """Wait for everything queued on device ``index`` (not just the current one)."""
        if self.module is not None:
            self.module.synchronize(index)

    def copy_threads(self) -> None:
        """cpu: one host thread for the copy probes. A copy split over threads waits for the
        slowest of them, and on a shared machine that is whichever the scheduler parked:
        4 MiB copies swing from 0.2 ms to 100 ms with threads, not without."""
        if self.module is None:
            self.torch.set_num_threads(1)

    def host_buffer(self, numel: int, dtype: Any) -> tuple[Any, bool]:
        """(host tensor, pinned?): page-locked where the backend has pinned memory, else pageable."""
        if self.module is not None:
            try:
                return self.torch.empty(numel, dtype=dtype, pin_memory=True), True
            except RuntimeError:
                pass  # no pinned allocator: a pageable copy is still a host-device copy
        return self.torch.empty(numel, dtype=dtype), False

    def device_name(self, index: int) -> str:
        if self.module is None:
            return platform.processor() or platform.machine() or "cpu"
        return str(self.module.get_device_name(index))

    def timer(self) -> _WallTimer | _EventTimer:
        return _WallTimer() if self.module is None else _EventTimer(self.module)

    def seed_everything(self, seed: int) -> None:
        self.torch.manual_seed(seed)
        if self.module is not None and hasattr(self.module, "manual_seed_all"):
            self.module.manual_seed_all(seed)

    def strict_fp32(self) -> None:
        """Make fp32 matmuls true fp32 (no TF32 on cuda, no HF32 on npu) so tolerances hold."""
        cuda_matmul = getattr(getattr(self.torch, "backends", None), "cuda", None)
        if cuda_matmul is not None and hasattr(cuda_matmul, "matmul"):
            cuda_matmul.matmul.allow_tf32 = False
        npu_matmul = getattr(self.module, "matmul", None) if self.name == "npu" else None
        if npu_matmul is not None and hasattr(npu_matmul, "allow_hf32"):
            npu_matmul.allow_hf32 = False


def _import_torch() -> Any:
    try:
        import torch
    except Exception as exc:  # ImportError, or OSError from a broken native library
        raise SetupError(f"cannot import torch: {type(exc).__name__}: {exc}") from exc
    return torch


def _load_npu() -> Any:
    try:
        torch = _import_torch()
        import torch_npu  # noqa: F401 - registers the npu device type
    except SetupError:
        raise
    except Exception as exc:
        raise SetupError(f"cannot import torch_npu: {type(exc).__name__}: {exc}") from exc
    return torch


def _require_devices(backend: Backend) -> Backend:
    if backend.module is not None and not (backend.module.is_available() and backend.device_count() > 0):
        raise SetupError(f"no {backend.name} devices visible")
    return backend


def load_backend(requested: str) -> Backend:
    """Import torch for ``requested`` and check that it has devices; SetupError otherwise.

    ``auto`` picks npu if torch_npu imports and sees devices, else cuda, else cpu. A
    failed torch_npu import under ``auto`` re-executes this worker with npu ruled out
    (and the reason kept as a note), because the failed import leaves torch half-loaded.
    """
    if requested not in BACKENDS:
        raise SetupError(f"unknown backend {requested!r}; expected one of {', '.join(BACKENDS)}")
    notes = [os.environ[NPU_NOTE_ENV]] if os.environ.get(NPU_NOTE_ENV) else []
    if requested == "npu":
        return _require_devices(Backend("npu", _load_npu(), notes))
    if requested == "auto" and not os.environ.get(NO_NPU_ENV) and importlib.util.find_spec("torch_npu"):
        try:
            torch = _load_npu()
        except SetupError as exc:
            os.environ[NO_NPU_ENV] = "1"
            os.environ[NPU_NOTE_ENV] = f"auto: npu ruled out: {exc}"
            sys.stdout.flush()
            sys.stderr.flush()
            os.execv(sys.executable, [sys.executable, *sys.argv])  # noqa: S606 - same argv, no shell
        npu = Backend("npu", torch, notes)
        if npu.module.is_available() and npu.device_count() > 0:
            return npu
        notes.append("auto: torch_npu imported but sees no devices")
        return _pick_cuda_or_cpu(torch, notes)
    # cpu / cuda (and auto without torch_npu): with torch_npu installed but no CANN, a
    # plain ``import torch`` fails while autoloading it, so switch the autoload off.
    os.environ["TORCH_DEVICE_BACKEND_AUTOLOAD"] = "0"
    torch = _import_torch()
    if requested == "cuda":
        return _require_devices(Backend("cuda", torch, notes))
    if requested == "cpu":
        return Backend("cpu", torch, notes)
    return _pick_cuda_or_cpu(torch, notes)


def _pick_cuda_or_cpu(torch: Any, notes: list[str]) -> Backend:
    if torch.cuda.is_available() and torch.cuda.device_count() > 0:
        return Backend("cuda", torch, notes)
    return Backend("cpu", torch, notes)


# --------------------------------------------------------------------------- worker scaffolding


class Counts:
    """How much to run: warm-up iterations and seconds, timed iterations per loop, loops."""

    def __init__(self, warmup: int, warmup_seconds: float, iterations: int, repeats: int) -> None:
        self.warmup = warmup
        self.warmup_seconds = warmup_seconds
        self.iterations = iterations
        self.repeats = repeats


def add_timing_arguments(parser: argparse.ArgumentParser) -> None:
    """The flags every worker takes: backend, warm-up, iterations, repeats, tag (-1/0: backend default)."""
    parser.add_argument("--backend", choices=BACKENDS, default="auto")
    parser.add_argument("--warmup", type=int, default=-1, help="untimed iterations (at least)")
    parser.add_argument("--warmup-seconds", type=float, default=-1.0, help="untimed seconds (at least)")
    parser.add_argument("--iterations", type=int, default=0, help="timed iterations per loop")
    parser.add_argument("--repeats", type=int, default=0, help="timed loops; the fastest one counts")
    parser.add_argument("--tag", default="", help="ignored; lets the runner find its processes")


def parse_copy_probe_args(argv: list[str] | None, description: str, size_help: str) -> argparse.Namespace:
    """The flags of the copy probes (membw, h2d, p2p): timing, ``--devices`` and ``--size-bytes``."""
    parser = argparse.ArgumentParser(description=description)
    add_timing_arguments(parser)
    parser.add_argument("--devices", default="all", help="'all' or comma-separated device indices")
    parser.add_argument("--size-bytes", type=int, default=0, help=f"{size_help} (0: backend default)")
    return parser.parse_args(argv)


def resolve_counts(args: argparse.Namespace, default: Counts) -> Counts:
    return Counts(
        warmup=args.warmup if args.warmup >= 0 else default.warmup,
        warmup_seconds=args.warmup_seconds if args.warmup_seconds >= 0 else default.warmup_seconds,
        iterations=args.iterations or default.iterations,
        repeats=args.repeats or default.repeats,
    )


def select_devices(spec: str, backend: Backend) -> list[int]:
    """Device indices from ``all`` or ``0,1,2``.

    On the cpu backend an explicit list names fake devices that all share host memory
    (so multi-device probes keep their shape in CI); ``all`` is one device.
    """
    wanted = None if spec in ("", "all") else [int(part) for part in spec.split(",") if part.strip()]
    if backend.module is None:
        return wanted if wanted else [0]
    count = backend.device_count()
    if wanted is None:
        return list(range(count))
    missing = [d for d in wanted if not 0 <= d < count]
    if missing:
        raise SetupError(f"device(s) {missing} not visible ({count} {backend.name} devices)")
    return wanted


def warm_up(run_once: Callable[[], None], synchronize: Callable[[], None], counts: Counts) -> int:
    """Run ``run_once`` at least ``counts.warmup`` times and for at least ``counts.warmup_seconds``.

    The time-based part waits for the device after every call, so the host clock sees the
    device's work rather than the launch queue. Returns how many calls ran.
    """
    done = 0
    start = time.perf_counter()
    while done < counts.warmup or time.perf_counter() - start < counts.warmup_seconds:
        run_once()
        done += 1
        if counts.warmup_seconds > 0:
            synchronize()
    synchronize()
    return done


def best_of(backend: Backend, run_once: Callable[[], None], counts: Counts) -> tuple[float, list[float]]:
    """Time ``counts.repeats`` loops of ``counts.iterations`` calls: (fastest loop's seconds, every loop's)."""
    loops = []
    for _ in range(counts.repeats):
        timer = backend.timer()
        timer.start()
        for _ in range(counts.iterations):
            run_once()
        loops.append(timer.stop())
        backend.synchronize()
    return min(loops), loops


def run_probe(probe: str, requested_backend: str, prepare: Callable[[Backend], Any],
              execute: Callable[[Backend, Any, dict[str, Any]], None], *,
              validate: Callable[[], None] | None = None,
              initial: dict[str, Any] | None = None) -> dict[str, Any]:
    """One single-process probe through its stages, with the protocol's statuses.

    ``validate`` runs before torch is imported (a typo should not cost seconds); ``prepare``
    (setup stage) turns the backend into a plan; ``execute`` (exec stage) measures into the
    result, which starts as ``initial``. "connect" is device attach here: the stage where a
    wedged driver hangs.
    """
    result: dict[str, Any] = {"probe": probe, **(initial or {})}
    report_stage("setup")
    stage = "setup"
    try:
        if validate is not None:
            validate()
        backend = load_backend(requested_backend)
        result.update(backend=backend.name, torch_version=str(backend.torch.__version__), notes=backend.notes)
        plan = prepare(backend)
        stage = "connect"
        report_stage(stage)
        stall_if_requested(stage)
        backend.strict_fp32()
        backend.seed_everything(int.from_bytes(os.urandom(7), "little"))
        stage = "exec"
        report_stage(stage)
        stall_if_requested(stage)
        execute(backend, plan, result)
    except SetupError as exc:
        result.update(status="error", stage=stage, message=str(exc))
        return result
    except Exception as exc:
        message = f"{type(exc).__name__}: {exc}"
        environmental = stage != "exec" or "out of memory" in message.lower()
        status = "timeout" if looks_like_timeout(exc) else ("error" if environmental else "fail")
        result.update(status=status, stage=stage, message=message)
        return result
    report_stage("done")
    result.update(status="ok", stage="done")
    return result


def worker_main(run: Callable[[], dict[str, Any]]) -> int:
    result = run()
    emit_result(result)
    return EXIT_CODES[result["status"]]


def discover(requested: str) -> dict[str, Any]:
    try:
        backend = load_backend(requested)
    except SetupError as exc:
        return {"probe": "discover", "status": "error", "message": str(exc)}
    return {
        "probe": "discover",
        "status": "ok",
        "backend": backend.name,
        "device_count": backend.device_count(),
        "model": backend.device_name(0),
        "torch_version": str(backend.torch.__version__),
        "notes": backend.notes,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Resolve a probe backend and count its devices.")
    parser.add_argument("--discover", action="store_true", required=True)
    parser.add_argument("--backend", choices=BACKENDS, default="auto")
    args = parser.parse_args(argv)
    result = discover(args.backend)
    emit_result(result)
    return 0 if result["status"] == "ok" else EXIT_CODES["error"]


if __name__ == "__main__":
    sys.exit(main())
