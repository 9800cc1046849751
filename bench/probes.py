"""Does the probe measure what plain torch measures? GEMM FLOP/s and all-reduce busbw, side by side.

    python bench/probes.py --backend cpu
    python bench/probes.py --backend cuda            # on a GPU box
    python bench/probes.py --backend npu --python /opt/train/bin/python

For each row the probe runs through agent.probes.runner (worker processes, watchdog,
correctness check) and a plain loop runs in the same session: ``torch.matmul`` timed in
this process, and a bare ``torch.distributed.all_reduce`` loop in its own ranks. Both sides
follow the same recipe, so the ratio compares measurements and not warm-up luck: a warm-up
of ``--warmup`` iterations and at least ``--warmup-seconds`` (GPU and NPU clocks ramp up
under load; a cold plain loop on an H200 read 683 TFLOP/s against the probe's 770), then the
fastest of ``--repeats`` timed loops of ``--iterations``. The probe should land within 10 %
of the plain figure.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from agent.probes.records import ProbeSettings
from agent.probes.runner import _free_port, run_allreduce, run_gemm

TOLERANCE = 0.10
DTYPES = {"fp16": "float16", "bf16": "bfloat16", "fp32": "float32"}


def _torch(backend: str) -> Any:
    if backend in ("cpu", "cuda"):
        os.environ["TORCH_DEVICE_BACKEND_AUTOLOAD"] = "0"
    import torch

    if backend == "npu":
        import torch_npu  # noqa: F401
    return torch


def _warm_up(step: Any, synchronize: Any, iterations: int, seconds: float) -> None:
    """At least ``iterations`` steps and at least ``seconds`` of them, the device drained each time."""
    done, start = 0, time.perf_counter()
    while done < iterations or time.perf_counter() - start < seconds:
        step()
        synchronize()
        done += 1


def plain_matmul_flops(backend: str, size: int, dtype: str, *, warmup: int, warmup_s: float, iterations: int,
                       repeats: int) -> float:
    """FLOP/s of the fastest of ``repeats`` timed loops of ``iterations`` matmuls on device 0."""
    torch = _torch(backend)
    device = torch.device("cpu") if backend == "cpu" else torch.device(backend, 0)
    module = None if backend == "cpu" else getattr(torch, backend)
    if module is not None:
        module.set_device(0)
    a = torch.randn(size, size, device=device, dtype=getattr(torch, DTYPES[dtype]))
    b = torch.randn_like(a)
    c = torch.empty_like(a)
    synchronize = (lambda: None) if module is None else module.synchronize
    _warm_up(lambda: torch.matmul(a, b, out=c), synchronize, warmup, warmup_s)
    best = float("inf")
    for _ in range(repeats):
        if module is None:
            start = time.perf_counter()
            for _ in range(iterations):
                torch.matmul(a, b, out=c)
            seconds = time.perf_counter() - start
        else:
            begin, end = module.Event(enable_timing=True), module.Event(enable_timing=True)
            begin.record()
            for _ in range(iterations):
                torch.matmul(a, b, out=c)
            end.record()
            end.synchronize()
            seconds = begin.elapsed_time(end) / 1000.0
        best = min(best, seconds)
    return 2.0 * size**3 * iterations / best


def plain_allreduce_rank(backend: str, size_bytes: int, *, warmup: int, warmup_s: float, iterations: int,
                         repeats: int) -> None:
    """One rank of the bare loop (run as ``--plain-rank``); rank 0 prints its busbw."""
    torch = _torch(backend)
    dist = torch.distributed
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    module = None if backend == "cpu" else getattr(torch, backend)
    if module is not None:
        module.set_device(rank)
    device = torch.device("cpu") if module is None else torch.device(backend, rank)
    synchronize = (lambda: None) if module is None else module.synchronize
    dist.init_process_group({"cpu": "gloo", "cuda": "nccl", "npu": "hccl"}[backend],
                            timeout=datetime.timedelta(seconds=120))
    buffer = torch.zeros(size_bytes // 4, dtype=torch.float32, device=device)
    for _ in range(warmup):
        dist.all_reduce(buffer)
    # Rank 0's clock decides when the timed warm-up ends; everyone runs the same collectives.
    flag, start = torch.zeros(1, device=device), time.perf_counter()
    while True:
        synchronize()
        flag.fill_(1.0 if rank == 0 and time.perf_counter() - start < warmup_s else 0.0)
        dist.all_reduce(flag)
        if flag.item() == 0:
            break
        dist.all_reduce(buffer)
    best = float("inf")
    for _ in range(repeats):
        synchronize()
        dist.barrier()
        begin = time.perf_counter()
        for _ in range(iterations):
            dist.all_reduce(buffer)
        synchronize()
        best = min(best, time.perf_counter() - begin)
    if rank == 0:
        algbw = size_bytes / (best / iterations)
        print(json.dumps({"busbw": algbw * 2 * (world - 1) / world}))
    dist.destroy_process_group()


def plain_allreduce_busbw(python: str, backend: str, ranks: int, *, size_bytes: int, timing: argparse.Namespace,
                          ) -> float:
    env = dict(os.environ, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(_free_port()), WORLD_SIZE=str(ranks))
    if backend == "cpu":
        env.setdefault("GLOO_SOCKET_IFNAME", "lo")
    argv = [python, __file__, "--plain-rank", "--backend", backend, "--bytes", str(size_bytes),
            "--warmup", str(timing.warmup), "--warmup-seconds", str(timing.warmup_seconds),
            "--iterations", str(timing.iterations), "--repeats", str(timing.repeats)]
    procs = [subprocess.Popen(argv, env=dict(env, RANK=str(r), LOCAL_RANK=str(r)),
                              stdout=subprocess.PIPE, text=True) for r in range(ranks)]
    outputs = [proc.communicate(timeout=600)[0] for proc in procs]
    return float(json.loads(outputs[0].strip().splitlines()[-1])["busbw"])


def row(name: str, probe: float, plain: float, unit: float, unit_name: str) -> str:
    ratio = probe / plain if plain else float("nan")
    verdict = "ok" if abs(ratio - 1) <= TOLERANCE else "OFF"
    return (f"{name:<34} {probe / unit:>12.3f} {plain / unit:>12.3f} {unit_name:<7} {ratio:>6.3f}  {verdict}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--backend", choices=("cpu", "cuda", "npu"), default="cpu")
    parser.add_argument("--python", default=sys.executable, help="probe interpreter")
    parser.add_argument("--size", type=int, help="GEMM size (cpu 1024, else 8192)")
    parser.add_argument("--dtype", choices=tuple(DTYPES), help="GEMM dtype (cpu fp32, else bf16)")
    parser.add_argument("--bytes", type=int, help="all-reduce bytes (cpu 8 MiB, else 256 MiB)")
    parser.add_argument("--ranks", type=int, help="all-reduce ranks (cpu 2, else every device)")
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--warmup-seconds", type=float, help="timed warm-up (cpu 0, else 1 s)")
    parser.add_argument("--iterations", type=int, default=20)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--plain-rank", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    cpu = args.backend == "cpu"
    if args.warmup_seconds is None:
        args.warmup_seconds = 0.0 if cpu else 1.0
    size = args.size or (1024 if cpu else 8192)
    dtype = args.dtype or ("fp32" if cpu else "bf16")
    size_bytes = args.bytes or ((8 if cpu else 256) << 20)
    timing = {"warmup": args.warmup, "warmup_s": args.warmup_seconds, "iterations": args.iterations,
              "repeats": args.repeats}
    if args.plain_rank:
        plain_allreduce_rank(args.backend, size_bytes, **timing)
        return 0
    ranks = args.ranks or (2 if cpu else int(getattr(_torch(args.backend), args.backend).device_count()))

    settings = ProbeSettings(python=args.python, backend=args.backend, devices=(0,), gemm_size=size,
                             gemm_dtypes=(dtype,), use_lock=False, deadline_s=600.0, **timing)
    print(f"{'measurement':<34} {'probe':>12} {'plain':>12} {'unit':<7} {'ratio':>6}  within {TOLERANCE:.0%}")
    gemm = run_gemm(settings)
    if gemm.outcome != "pass" or not gemm.gemm:
        print(f"GEMM probe {gemm.outcome}: {gemm.message}")
        return 1
    plain = plain_matmul_flops(args.backend, size, dtype, **timing)
    print(row(f"GEMM {size} {dtype} device 0", gemm.gemm[0].flops, plain, 1e12, "TFLOP/s"))

    if ranks < 2:
        print(f"all-reduce: skipped, {ranks} device: an all-reduce needs at least 2")
        return 0
    ar_settings = dataclasses.replace(settings, devices=tuple(range(ranks)), allreduce_bytes=size_bytes)
    allreduce = run_allreduce(ar_settings)
    if allreduce.outcome != "pass" or allreduce.allreduce is None:
        print(f"all-reduce probe {allreduce.outcome}: {allreduce.message}")
        return 1
    plain_bus = plain_allreduce_busbw(args.python, args.backend, ranks, size_bytes=size_bytes, timing=args)
    print(row(f"all-reduce {size_bytes >> 20} MiB x {ranks} ranks busbw",
              allreduce.allreduce.busbw_bytes_per_second, plain_bus, 1e9, "GB/s"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
