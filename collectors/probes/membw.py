"""Device memory bandwidth probe worker: per device, time a buffer-to-buffer copy on the device.

Run by path under the probe interpreter (standard library + torch only)::

    python collectors/probes/membw.py --backend npu --devices 0,1 --size-bytes 1073741824

For every device: two buffers of ``--size-bytes`` filled with random data, a warm-up, then
the fastest of ``--repeats`` timed loops of ``--iterations`` copies (``dst.copy_(src)``).
Bandwidth counts every byte read and every byte written: 2 x size / seconds per copy, the
convention the HBM figures in agent/probes/peaks.py are stated in.
After timing, the destination must equal the source bit for bit: a copy that corrupts data
fails the probe (``correct``).

Prints one JSON object on stdout (see ``_common`` for the protocol)::

    {"probe": "membw", "status": "ok", "measurements": [{"device": 0, "model": ...,
     "size_bytes": ..., "iterations": ..., "repeats": ..., "seconds": <fastest loop>,
     "loop_seconds": [...], "bytes_per_second": ..., "correct": true}]}
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

import _common as common

_INT32_BYTES = 4
DEFAULTS = {  # backend -> (size_bytes, counts)
    "npu": (1 << 30, common.Counts(warmup=5, warmup_seconds=0.5, iterations=20, repeats=5)),
    "cuda": (1 << 30, common.Counts(warmup=5, warmup_seconds=0.5, iterations=20, repeats=5)),
    "cpu": (64 << 20, common.Counts(warmup=2, warmup_seconds=0.0, iterations=5, repeats=3)),
}


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    return common.parse_copy_probe_args(argv, "npuwatch device memory bandwidth probe worker", "buffer size")


def random_buffer(torch: Any, numel: int, device: Any) -> Any:
    """int32 random data: a bitwise copy of it compares exactly (no NaN != NaN)."""
    return torch.randint(-(2**31), 2**31 - 1, (numel,), dtype=torch.int32, device=device)


def corrupt_one_element(buffer: Any) -> None:
    """Test hook: flip every bit of one element, as a bad memory cell or a broken link would."""
    index = buffer.numel() // 2
    buffer[index] = ~buffer[index]


def copies_match(torch: Any, got: Any, expected: Any) -> bool:
    return bool(torch.equal(got, expected))


def measure(backend: common.Backend, device_index: int, *, size_bytes: int, counts: common.Counts) -> dict[str, Any]:
    torch = backend.torch
    device = backend.device(device_index)
    numel = max(1, size_bytes // _INT32_BYTES)
    src = random_buffer(torch, numel, device)
    dst = torch.zeros_like(src)  # written once now: no first-touch page faults inside the timing

    def copy() -> None:
        dst.copy_(src)

    common.warm_up(copy, backend.synchronize, counts)
    seconds, loops = common.best_of(backend, copy, counts)
    if common.corruption_requested("membw"):
        corrupt_one_element(dst)
    moved = 2 * numel * _INT32_BYTES * counts.iterations  # read + written
    return {
        "device": device_index,
        "model": backend.device_name(device_index),
        "size_bytes": numel * _INT32_BYTES,
        "iterations": counts.iterations,
        "repeats": counts.repeats,
        "seconds": seconds,
        "loop_seconds": loops,
        "bytes_per_second": moved / seconds if seconds > 0 else 0.0,
        "correct": copies_match(torch, dst, src),
    }


def run(args: argparse.Namespace) -> dict[str, Any]:
    def prepare(backend: common.Backend) -> tuple[list[int], int, common.Counts]:
        size_bytes, counts = DEFAULTS[backend.name]
        backend.copy_threads()
        return (common.select_devices(args.devices, backend), args.size_bytes or size_bytes,
                common.resolve_counts(args, counts))

    def execute(backend: common.Backend, plan: tuple[list[int], int, common.Counts], result: dict[str, Any]) -> None:
        devices, size_bytes, counts = plan
        for device_index in devices:
            backend.set_device(device_index)
            result["measurements"].append(measure(backend, device_index, size_bytes=size_bytes, counts=counts))
            common.report_stage("exec", progress=f"device {device_index}")

    return common.run_probe("membw", args.backend, prepare, execute, initial={"measurements": []})


def main(argv: list[str] | None = None) -> int:
    return common.worker_main(lambda: run(parse_args(argv)))


if __name__ == "__main__":
    sys.exit(main())
