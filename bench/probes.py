"""Does each probe measure what plain torch measures? Side by side, probe against a plain loop.

    python bench/probes.py --backend cpu
    python bench/probes.py --backend cuda            # on a GPU box
    python bench/probes.py --backend npu --python /opt/train/bin/python

For each row the probe runs through agent.probes (worker processes, watchdog, correctness
checks) and a plain loop runs in the same session: ``torch.matmul``, ``dst.copy_(src)`` on a
device, pinned host <-> device copies and a device 0 -> 1 copy timed in this process, and a
bare ``torch.distributed.all_reduce`` loop in its own ranks. Both sides follow the same
recipe, so the ratio compares measurements and not warm-up luck: a warm-up of ``--warmup``
iterations and at least ``--warmup-seconds`` (GPU and NPU clocks ramp up under load; a cold
plain loop on an H200 read 683 TFLOP/s against the probe's 770), then the fastest of
``--repeats`` timed loops of ``--iterations``. The sustained GEMM row compares the best
window of a short sustained run with the plain matmul. The probe should land within 10 %
of the plain figure. On the cpu backend the copies run on one host thread on both sides,
as the probes do there.
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

from agent.probes.bandwidth import run_h2d, run_membw, run_p2p
from agent.probes.records import ProbeResult, ProbeSettings
from agent.probes.runner import _free_port, run_allreduce, run_gemm
from agent.probes.sustained import run_sustained_gemm

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


class Device:
    """Device selection and synchronisation for the plain loops: the only backend-specific parts."""

    def __init__(self, backend: str) -> None:
        self.torch = _torch(backend)
        self.backend = backend
        self.module = None if backend == "cpu" else getattr(self.torch, backend)

    def __call__(self, index: int) -> Any:
        return self.torch.device("cpu") if self.module is None else self.torch.device(self.backend, index)

    def synchronize(self, *indices: int) -> None:
        if self.module is not None:
            for index in indices or (0,):
                self.module.synchronize(index)

    def best_seconds(self, step: Any, timing: dict[str, Any], sync: tuple[int, ...] = (0,)) -> float:
        """Warm-up, then the fastest of ``repeats`` loops of ``iterations`` steps, host-timed between syncs."""
        _warm_up(step, lambda: self.synchronize(*sync), timing["warmup"], timing["warmup_s"])
        best = float("inf")
        for _ in range(timing["repeats"]):
            self.synchronize(*sync)
            start = time.perf_counter()
            for _ in range(timing["iterations"]):
                step()
            self.synchronize(*sync)
            best = min(best, time.perf_counter() - start)
        return best


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


def plain_copy_rates(backend: str, size_bytes: int, timing: dict[str, Any], devices: int) -> dict[str, float]:
    """Bytes/s of plain copies: device memory (read + written), pinned h2d and d2h, device 0 -> 1."""
    dev = Device(backend)
    torch = dev.torch
    numel = size_bytes // 4
    src = torch.randint(0, 1 << 30, (numel,), dtype=torch.int32, device=dev(0))
    dst = torch.zeros_like(src)
    host = torch.zeros(numel, dtype=torch.int32, pin_memory=dev.module is not None)
    rates = {
        "membw": 2 * size_bytes * timing["iterations"] / dev.best_seconds(lambda: dst.copy_(src), timing),
        "h2d": size_bytes * timing["iterations"] / dev.best_seconds(
            lambda: dst.copy_(host, non_blocking=True), timing),
        "d2h": size_bytes * timing["iterations"] / dev.best_seconds(
            lambda: host.copy_(src, non_blocking=True), timing),
    }
    if devices >= 2 or dev.module is None:
        other = torch.zeros(numel, dtype=torch.int32, device=dev(1))
        rates["p2p"] = size_bytes * timing["iterations"] / dev.best_seconds(
            lambda: other.copy_(src), timing, sync=(0, 1))
    return rates


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


def _failed(name: str, result: ProbeResult) -> bool:
    if result.outcome in ("pass", "skipped"):
        return False
    print(f"{name} probe {result.outcome}: {result.message}")
    return True


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--backend", choices=("cpu", "cuda", "npu"), default="cpu")
    parser.add_argument("--python", default=sys.executable, help="probe interpreter")
    parser.add_argument("--size", type=int, help="GEMM size (cpu 1024, else 8192)")
    parser.add_argument("--dtype", choices=tuple(DTYPES), help="GEMM dtype (cpu fp32, else bf16)")
    parser.add_argument("--bytes", type=int, help="all-reduce bytes (cpu 8 MiB, else 256 MiB)")
    parser.add_argument("--copy-bytes", type=int, help="membw/h2d/p2p buffer (cpu 16 MiB, else 1 GiB)")
    parser.add_argument("--sustained", type=float, help="sustained GEMM seconds (cpu 4, else 30)")
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
    copy_bytes = args.copy_bytes or ((16 << 20) if cpu else (1 << 30))
    timing = {"warmup": args.warmup, "warmup_s": args.warmup_seconds, "iterations": args.iterations,
              "repeats": args.repeats}
    if args.plain_rank:
        plain_allreduce_rank(args.backend, size_bytes, **timing)
        return 0
    devices = 1 if cpu else int(getattr(_torch(args.backend), args.backend).device_count())
    ranks = args.ranks or (2 if cpu else devices)

    settings = ProbeSettings(python=args.python, backend=args.backend, devices=(0,), gemm_size=size,
                             gemm_dtypes=(dtype,), use_lock=False, deadline_s=600.0, **timing)
    print(f"{'measurement':<34} {'probe':>12} {'plain':>12} {'unit':<7} {'ratio':>6}  within {TOLERANCE:.0%}")
    gemm = run_gemm(settings)
    if _failed("GEMM", gemm) or not gemm.gemm:
        return 1
    plain_flops = plain_matmul_flops(args.backend, size, dtype, **timing)
    print(row(f"GEMM {size} {dtype} device 0", gemm.gemm[0].flops, plain_flops, 1e12, "TFLOP/s"))

    if ranks < 2:
        print(f"all-reduce: skipped, {ranks} device: an all-reduce needs at least 2")
    else:
        ar_settings = dataclasses.replace(settings, devices=tuple(range(ranks)), allreduce_bytes=size_bytes)
        allreduce = run_allreduce(ar_settings)
        if _failed("all-reduce", allreduce) or allreduce.allreduce is None:
            return 1
        plain_bus = plain_allreduce_busbw(args.python, args.backend, ranks, size_bytes=size_bytes, timing=args)
        print(row(f"all-reduce {size_bytes >> 20} MiB x {ranks} ranks busbw",
                  allreduce.allreduce.busbw_bytes_per_second, plain_bus, 1e9, "GB/s"))

    # Copies: plain loops on one host thread on cpu, as the probe workers run them there.
    threads = _torch(args.backend).get_num_threads()
    if cpu:
        _torch(args.backend).set_num_threads(1)
    plain = plain_copy_rates(args.backend, copy_bytes, timing, devices)
    _torch(args.backend).set_num_threads(threads)
    copy_settings = dataclasses.replace(settings, copy_bytes=copy_bytes)
    for name, run in (("membw", run_membw), ("h2d", run_h2d)):
        result = run(copy_settings)
        if _failed(name, result):
            return 1
        for cell in result.bandwidth:
            print(row(f"{cell.kind} {copy_bytes >> 20} MiB device 0", cell.bytes_per_second, plain[cell.kind],
                      1e9, "GB/s"))
    if "p2p" in plain:
        p2p = run_p2p(dataclasses.replace(copy_settings, devices=(0, 1)))
        if _failed("p2p", p2p):
            return 1
        cell = next(c for c in p2p.bandwidth if (c.device, c.peer) == (0, 1))
        print(row(f"p2p {copy_bytes >> 20} MiB device 0 -> 1", cell.bytes_per_second, plain["p2p"], 1e9, "GB/s"))
    else:
        print(f"p2p: skipped, {devices} device: a device-to-device copy needs at least 2")

    duration = args.sustained or (4.0 if cpu else 30.0)
    sustained = run_sustained_gemm(dataclasses.replace(
        settings, sustained_s=duration, window_s=duration / 4, warmup=None, iterations=None, repeats=None,
        max_throttle_drop=1.0))
    if _failed("sustained GEMM", sustained) or not sustained.sustained:
        return 1
    m = sustained.sustained[0]
    print(row(f"sustained GEMM best of {len(m.windows)} windows", m.best_flops, plain_flops, 1e12, "TFLOP/s"))
    print(f"{'':<34} sustained windows: " + " ".join(f"{w.flops / 1e12:.4g}" for w in m.windows) + " TFLOP/s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
