"""Host <-> device bandwidth probe worker: per device, time host-to-device and device-to-host copies.

Run by path under the probe interpreter (standard library + torch only)::

    python collectors/probes/h2d.py --backend npu --devices 0,1 --size-bytes 268435456

For every device and direction: a host buffer (page-locked where the backend has pinned
memory: the PCIe DMA engines read it directly; on the cpu backend an ordinary one) and a
device buffer of ``--size-bytes``, a warm-up, then the fastest of ``--repeats`` timed loops
of ``--iterations`` copies. Bandwidth is size / seconds per copy, one direction at a time
(``ascend-dmi --bw -t h2d`` / ``-t d2h`` measure the same). After timing, the data that
arrived must equal the data sent (``correct``).

Prints one JSON object on stdout (see ``_common`` for the protocol)::

    {"probe": "h2d", "status": "ok", "measurements": [{"device": 0, "model": ...,
     "direction": "h2d" | "d2h", "pinned": true, "size_bytes": ..., "iterations": ...,
     "repeats": ..., "seconds": ..., "loop_seconds": [...], "bytes_per_second": ...,
     "correct": true}, ...]}
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

import _common as common
import membw

_INT32_BYTES = 4
DIRECTIONS = ("h2d", "d2h")
DEFAULTS = {  # backend -> (size_bytes, counts)
    "npu": (256 << 20, common.Counts(warmup=3, warmup_seconds=0.5, iterations=10, repeats=3)),
    "cuda": (256 << 20, common.Counts(warmup=3, warmup_seconds=0.5, iterations=10, repeats=3)),
    "cpu": (32 << 20, common.Counts(warmup=1, warmup_seconds=0.0, iterations=5, repeats=3)),
}


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    return common.parse_copy_probe_args(argv, "npuwatch host <-> device bandwidth probe worker", "buffer size")


def measure(backend: common.Backend, device_index: int, direction: str, *, size_bytes: int,
            counts: common.Counts) -> dict[str, Any]:
    torch = backend.torch
    numel = max(1, size_bytes // _INT32_BYTES)
    host, pinned = backend.host_buffer(numel, torch.int32)
    on_device = torch.zeros(numel, dtype=torch.int32, device=backend.device(device_index))
    # Both buffers written before the timing (no first-touch page faults in it), the source with data.
    if direction == "h2d":
        host.copy_(membw.random_buffer(torch, numel, torch.device("cpu")))
        src, dst = host, on_device
    else:
        host.zero_()
        on_device.copy_(membw.random_buffer(torch, numel, on_device.device))
        src, dst = on_device, host
    backend.synchronize()

    def copy() -> None:
        dst.copy_(src, non_blocking=pinned)

    common.warm_up(copy, backend.synchronize, counts)
    seconds, loops = common.best_of(backend, copy, counts)
    if common.corruption_requested("h2d"):
        membw.corrupt_one_element(dst)
    moved = numel * _INT32_BYTES * counts.iterations
    return {
        "device": device_index,
        "model": backend.device_name(device_index),
        "direction": direction,
        "pinned": pinned,
        "size_bytes": numel * _INT32_BYTES,
        "iterations": counts.iterations,
        "repeats": counts.repeats,
        "seconds": seconds,
        "loop_seconds": loops,
        "bytes_per_second": moved / seconds if seconds > 0 else 0.0,
        "correct": membw.copies_match(torch, dst.cpu(), src.cpu()),
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
            for direction in DIRECTIONS:
                result["measurements"].append(measure(backend, device_index, direction, size_bytes=size_bytes,
                                                      counts=counts))
                common.report_stage("exec", progress=f"device {device_index} {direction}")

    return common.run_probe("h2d", args.backend, prepare, execute, initial={"measurements": []})


def main(argv: list[str] | None = None) -> int:
    return common.worker_main(lambda: run(parse_args(argv)))


if __name__ == "__main__":
    sys.exit(main())
