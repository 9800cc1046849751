"""All-reduce probe worker: one rank of a timed, checked all-reduce.

Run by path under the probe interpreter (standard library + torch only), one process per
device, with the rendezvous in the environment as torchrun would set it::

    RANK=0 WORLD_SIZE=8 LOCAL_RANK=0 MASTER_ADDR=10.0.0.1 MASTER_PORT=29500 \\
        python collectors/probes/allreduce.py --backend npu --device 0 --size-bytes 268435456

Rank 0 hosts torch.distributed's TCPStore at MASTER_ADDR:MASTER_PORT; every other rank
(on this node or on others) connects to it, so node and cluster scope share one code path
and no home-made protocol. Stages, as the runner reports them when a run hangs:

- ``connect``: store + process group + one tiny all-reduce (nccl and hccl build their
  communicators lazily, on the first collective);
- ``exec``: warm-up (``--warmup`` all-reduces and at least ``--warmup-seconds`` by rank 0's
  clock, which decides for every rank so that all run the same collectives), then
  ``--repeats`` timed loops of ``--iterations`` all-reduces of one fixed message of fp32
  zeros (rank 0's fastest loop counts), then one all-reduce of a known pattern whose sum
  every rank checks element by element.

algbw = bytes / (seconds per all-reduce); busbw = algbw x 2(n-1)/n (nccl-tests). Every
rank reports rank 0's timing and the all-ranks verdict on correctness, so all nodes of a
cluster probe print one consistent result.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import os
import sys
import time
from typing import Any

import _common as common

_FP32_BYTES = 4
_PATTERN_PERIOD = 7
DEFAULTS = {  # backend -> (size_bytes, counts)
    "npu": (256 << 20, common.Counts(warmup=5, warmup_seconds=1.0, iterations=20, repeats=3)),
    "cuda": (256 << 20, common.Counts(warmup=5, warmup_seconds=1.0, iterations=20, repeats=3)),
    "cpu": (8 << 20, common.Counts(warmup=2, warmup_seconds=0.0, iterations=5, repeats=3)),
}


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="npuwatch all-reduce probe worker (one rank)")
    common.add_timing_arguments(parser)
    parser.add_argument("--device", type=int, default=-1, help="device index (default: LOCAL_RANK)")
    parser.add_argument("--size-bytes", type=int, default=0, help="message size (0: backend default)")
    parser.add_argument("--connect-timeout", type=float, default=120.0)
    parser.add_argument("--exec-timeout", type=float, default=120.0)
    return parser.parse_args(argv)


def bus_bandwidth(algbw: float, world_size: int) -> float:
    """nccl-tests' all-reduce bus bandwidth: algbw x 2(n-1)/n (n >= 2: one rank moves nothing)."""
    if world_size < 2:
        raise ValueError(f"bus bandwidth needs at least 2 ranks, got {world_size}")
    return algbw * 2.0 * (world_size - 1) / world_size


def _rendezvous() -> tuple[int, int, int, str, int]:
    try:
        env = os.environ
        return (int(env["RANK"]), int(env["WORLD_SIZE"]), int(env.get("LOCAL_RANK", "0")), env["MASTER_ADDR"],
                int(env["MASTER_PORT"]))
    except (KeyError, ValueError) as exc:
        raise common.SetupError(f"rendezvous environment incomplete: {exc}") from exc


def connect(backend: common.Backend, rank: int, world_size: int, master: tuple[str, int], *,
            connect_timeout: float, exec_timeout: float) -> Any:
    """Form the process group and push one element through it; returns torch.distributed."""
    torch = backend.torch
    dist = torch.distributed
    store = dist.TCPStore(master[0], master[1], world_size, is_master=rank == 0,
                          timeout=datetime.timedelta(seconds=connect_timeout), wait_for_workers=False)
    dist.init_process_group(backend.dist_backend, store=store, rank=rank, world_size=world_size,
                            timeout=datetime.timedelta(seconds=max(connect_timeout, exec_timeout)))
    probe = torch.ones(1, dtype=torch.float32, device=backend.device(torch_device_index(backend)))
    dist.all_reduce(probe)
    backend.synchronize()
    if int(probe.item()) != world_size:
        raise RuntimeError(f"connect all-reduce gave {probe.item()}, expected {world_size}")
    return dist


def torch_device_index(backend: common.Backend) -> int:
    return 0 if backend.module is None else int(backend.module.current_device())


def exchange(backend: common.Backend, dist: Any, values: list[float]) -> list[float]:
    """Sum a few floats over all ranks (used to share rank 0's timing and the failure count)."""
    torch = backend.torch
    tensor = torch.tensor(values, dtype=torch.float32, device=backend.device(torch_device_index(backend)))
    dist.all_reduce(tensor)
    return [float(v) for v in tensor.cpu().tolist()]


def warm_up(backend: common.Backend, dist: Any, buffer: Any, rank: int, counts: common.Counts) -> int:
    """All-reduce ``buffer`` ``counts.warmup`` times, then on until rank 0 has seen
    ``counts.warmup_seconds`` pass: after each extra round every rank learns rank 0's
    verdict through a one-element all-reduce, so all ranks stop after the same round."""
    torch = backend.torch
    flag = torch.zeros(1, dtype=torch.float32, device=buffer.device)
    start = time.perf_counter()
    done = 0
    while True:
        if done >= counts.warmup:
            backend.synchronize()
            more = rank == 0 and time.perf_counter() - start < counts.warmup_seconds
            flag.fill_(1.0 if more else 0.0)
            dist.all_reduce(flag)
            if float(flag.item()) == 0.0:
                return done
        dist.all_reduce(buffer)
        done += 1


def timed_loops(backend: common.Backend, dist: Any, buffer: Any, counts: common.Counts) -> list[float]:
    """Seconds of each of ``counts.repeats`` loops, every loop started together after a barrier."""
    loops = []
    for _ in range(counts.repeats):
        dist.barrier()
        timer = backend.timer()
        timer.start()
        for _ in range(counts.iterations):
            dist.all_reduce(buffer)
        loops.append(timer.stop())
        backend.synchronize()
    return loops


def measure(backend: common.Backend, dist: Any, rank: int, world_size: int, *, size_bytes: int,
            counts: common.Counts) -> dict[str, Any]:
    torch = backend.torch
    device = backend.device(torch_device_index(backend))
    numel = max(1, size_bytes // _FP32_BYTES)
    # Zeros for timing: repeated in-place sums of anything else overflow or go denormal.
    buffer = torch.zeros(numel, dtype=torch.float32, device=device)
    warm_up(backend, dist, buffer, rank, counts)
    common.report_stage("exec", rank, progress="warm-up")
    loops = timed_loops(backend, dist, buffer, counts)
    seconds = min(loops)
    common.report_stage("exec", rank, progress="timed")

    # Correctness: rank r contributes (r + 1) + (i mod 7); the sum is exact in fp32.
    pattern = (torch.arange(numel, dtype=torch.int32, device=device) % _PATTERN_PERIOD).to(torch.float32)
    buffer.copy_(pattern).add_(rank + 1)
    dist.all_reduce(buffer)
    if common.corruption_requested("allreduce", rank):
        buffer[numel // 2] += 1.0
    expected = pattern.mul_(world_size).add_(world_size * (world_size + 1) // 2)
    mismatches = int((buffer != expected).sum().item())
    del buffer, expected, pattern

    rank0_seconds, failed_ranks = exchange(
        backend, dist, [seconds if rank == 0 else 0.0, 1.0 if mismatches else 0.0])
    per_iteration = rank0_seconds / counts.iterations
    algbw = numel * _FP32_BYTES / per_iteration if per_iteration > 0 else 0.0
    return {
        "size_bytes": numel * _FP32_BYTES,
        "iterations": counts.iterations,
        "repeats": counts.repeats,
        "seconds_per_iteration": per_iteration,
        "local_seconds_per_iteration": seconds / counts.iterations,
        "algbw_bytes_per_second": algbw,
        "busbw_bytes_per_second": bus_bandwidth(algbw, world_size),
        "local_mismatches": mismatches,
        "failed_ranks": int(failed_ranks),
        "correct": failed_ranks == 0,
    }


def run(args: argparse.Namespace) -> dict[str, Any]:
    result: dict[str, Any] = {"probe": "allreduce"}
    stage, rank = "setup", int(os.environ.get("RANK", "0"))
    common.report_stage(stage, rank)
    dist: Any = None
    try:
        rank, world_size, local_rank, master_addr, master_port = _rendezvous()
        result.update(rank=rank, world_size=world_size, local_rank=local_rank)
        if world_size < 2:
            raise common.SetupError(f"WORLD_SIZE={world_size}: an all-reduce needs at least 2 ranks")
        backend = common.load_backend(args.backend)
        device_index = args.device if args.device >= 0 else local_rank
        result.update(backend=backend.name, device=device_index, torch_version=str(backend.torch.__version__),
                      notes=backend.notes)
        if backend.module is not None:
            if not 0 <= device_index < backend.device_count():
                count = backend.device_count()
                raise common.SetupError(f"device {device_index} not visible ({count} devices)")
            backend.set_device(device_index)
            result["model"] = backend.device_name(device_index)
        size_bytes, counts = DEFAULTS[backend.name]
        size_bytes = args.size_bytes or size_bytes
        counts = common.resolve_counts(args, counts)

        stage = "connect"
        common.report_stage(stage, rank)
        common.stall_if_requested(stage, rank)
        dist = connect(backend, rank, world_size, (master_addr, master_port),
                       connect_timeout=args.connect_timeout, exec_timeout=args.exec_timeout)

        stage = "exec"
        common.report_stage(stage, rank)
        common.stall_if_requested(stage, rank)
        result.update(measure(backend, dist, rank, world_size, size_bytes=size_bytes, counts=counts))
    except common.SetupError as exc:
        result.update(status="error", stage=stage, message=str(exc))
        return result
    except Exception as exc:
        result.update(common.collective_failure(exc, stage))
        return result
    finally:
        if dist is not None and dist.is_initialized():
            # Teardown after a broken collective may fail too; the verdict is already made.
            with contextlib.suppress(Exception):
                dist.destroy_process_group()
    common.report_stage("done", rank)
    result.update(status="ok", stage="done")
    return result


def main(argv: list[str] | None = None) -> int:
    result = run(parse_args(argv))
    common.emit_result(result)
    return common.EXIT_CODES[result["status"]]


if __name__ == "__main__":
    sys.exit(main())
