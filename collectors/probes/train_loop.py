"""A synchronous training loop, one rank of it: the job that fail-slow's cpu backend watches.

Not a probe of the hardware: a stand-in for a training job, so that the fail-slow path (the agent's
per-rank readings, alerts/failslow.rules.yml) can be run end to end on a machine without an NPU
(docs/failslow.md, "CPU ranks"). Run by path under the probe interpreter like the other workers
(standard library + torch), one process per rank, with torchrun's rendezvous in the environment::

    RANK=5 WORLD_SIZE=8 LOCAL_RANK=5 MASTER_ADDR=127.0.0.1 MASTER_PORT=29500 \\
        python collectors/probes/train_loop.py --backend cpu --duration 120 --slow-rank 5 --slow-at 40

Each step computes a fixed amount (``--matmuls`` products of two ``--size`` square fp32 matrices on
one thread), then all-reduces a gradient of ``--grad-bytes``: every rank waits in the collective for
the slowest. From ``--slow-at`` seconds after its first step, rank ``--slow-rank`` computes
``--slow-factor`` times as much each step, as a throttled chip would, and says when on stderr
(``@npuwatch-stage`` ``exec`` with ``slowed_at``, its Unix time). Rank 0 decides when ``--duration`` is
over: the gradient's last element carries its stop flag, so every rank stops after the same step.
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any

import _common as common
import allreduce

_FP32_BYTES = 4


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="npuwatch synchronous training loop (one rank)")
    parser.add_argument("--backend", choices=("cpu",), default="cpu",
                        help="cpu only: the loop stands in for a job where there is no NPU")
    parser.add_argument("--duration", type=float, default=60.0, help="seconds of steps, by rank 0's clock")
    parser.add_argument("--size", type=int, default=192, help="matrix size of each product")
    parser.add_argument("--matmuls", type=int, default=20, help="products per step")
    parser.add_argument("--grad-bytes", type=int, default=1 << 20, help="all-reduced bytes per step")
    parser.add_argument("--slow-rank", type=int, default=-1, help="the rank that slows (-1: none)")
    parser.add_argument("--slow-at", type=float, default=0.0, help="seconds after its first step")
    parser.add_argument("--slow-factor", type=float, default=1.0, help="its compute per step, times this")
    parser.add_argument("--connect-timeout", type=float, default=60.0)
    parser.add_argument("--exec-timeout", type=float, default=60.0)
    args = parser.parse_args(argv)
    if args.size < 1 or args.matmuls < 1 or args.grad_bytes < 2 * _FP32_BYTES or args.slow_factor < 1.0:
        parser.error("--size and --matmuls must be positive, --grad-bytes at least 8, --slow-factor at least 1")
    return args


def run(args: argparse.Namespace) -> dict[str, Any]:
    result: dict[str, Any] = {"probe": "train_loop", "backend": "cpu"}
    stage, rank = "setup", 0
    common.report_stage(stage)
    try:
        rank, world_size, _, master_addr, master_port = allreduce._rendezvous()
        result["rank"] = rank
        backend = common.load_backend("cpu")
        torch = backend.torch
        torch.set_num_threads(1)
        stage = "connect"
        common.report_stage(stage, rank)
        dist = allreduce.connect(backend, rank, world_size, (master_addr, master_port),
                                 connect_timeout=args.connect_timeout, exec_timeout=args.exec_timeout)
        stage = "exec"
        common.report_stage(stage, rank)
        result.update(_steps(args, torch, dist, rank))
        dist.destroy_process_group()
    except common.SetupError as exc:
        result.update(status="error", stage=stage, message=str(exc))
        return result
    except Exception as exc:
        result.update(common.collective_failure(exc, stage))
        return result
    common.report_stage("done", rank)
    result.update(status="ok", stage="done")
    return result


def _steps(args: argparse.Namespace, torch: Any, dist: Any, rank: int) -> dict[str, Any]:
    """The loop; returns the step counts and mean step times before and after the slowdown."""
    left = torch.rand(args.size, args.size)
    right = torch.rand(args.size, args.size)
    grad = torch.zeros(args.grad_bytes // _FP32_BYTES)
    start = time.time()
    slowed_at = 0.0
    steps = [0, 0]  # before, after the slowdown (this rank's)
    seconds = [0.0, 0.0]
    while True:
        step_start = time.time()
        if rank == args.slow_rank and not slowed_at and step_start - start >= args.slow_at:
            slowed_at = step_start
            common.report_stage("exec", rank, slowed_at=slowed_at, slow_factor=args.slow_factor)
        products = args.matmuls * (args.slow_factor if slowed_at else 1.0)
        whole = int(products)
        for _ in range(whole):
            torch.mm(left, right)
        if products > whole:  # a fractional factor: a smaller last product of the same share of the work
            part = max(1, int(args.size * (products - whole)))
            torch.mm(left[:part], right)
        grad.fill_(1.0)
        grad[-1] = 1.0 if rank == 0 and step_start - start >= args.duration else 0.0
        dist.all_reduce(grad)
        phase = 1 if slowed_at else 0
        steps[phase] += 1
        seconds[phase] += time.time() - step_start
        if float(grad[-1].item()) > 0.0:
            break
    return {"steps_before": steps[0], "steps_after": steps[1], "slowed_at": slowed_at,
            "step_s_before": seconds[0] / max(steps[0], 1), "step_s_after": seconds[1] / max(steps[1], 1)}


def main(argv: list[str] | None = None) -> int:
    return common.worker_main(lambda: run(parse_args(argv)))


if __name__ == "__main__":
    sys.exit(main())
