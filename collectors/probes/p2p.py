"""Chip-to-chip bandwidth probe worker: a copy bandwidth matrix over every ordered pair of devices.

Run by path under the probe interpreter (standard library + torch only)::

    python collectors/probes/p2p.py --backend npu --devices all --size-bytes 268435456

Every ordered pair (src, dst), src != dst, is measured on its own, so one slow link (HCCS on
Ascend, NVLink or PCIe P2P on GPUs) shows as one slow cell instead of being averaged away.
Per pair: a warm-up, then the fastest of ``--repeats`` timed loops of ``--iterations``
copies of ``--size-bytes`` from a buffer on src into a buffer on dst. Bandwidth is size /
seconds per copy (one direction, as ``ascend-dmi --bw -t p2p`` reports it). A copy between
two devices involves both, so each loop is timed on the host clock between waits for both
devices, not with one device's events. After timing, the destination must equal the source.

On the cpu backend ``--devices 0,1,2`` names fake devices in host memory: the copies are
memory copies, but the matrix keeps its full shape (CI runs it that way). With fewer than
two devices there is no pair: the result says ``skipped`` and why.

Prints one JSON object on stdout (see ``_common`` for the protocol)::

    {"probe": "p2p", "status": "ok", "devices": [0, 1], "model": ..., "skipped": null,
     "pairs": [{"src": 0, "dst": 1, "size_bytes": ..., "iterations": ..., "repeats": ...,
     "seconds": ..., "loop_seconds": [...], "bytes_per_second": ..., "correct": true}, ...]}
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any

import _common as common
import membw

_INT32_BYTES = 4
DEFAULTS = {  # backend -> (size_bytes, counts)
    "npu": (256 << 20, common.Counts(warmup=2, warmup_seconds=0.0, iterations=10, repeats=3)),
    "cuda": (256 << 20, common.Counts(warmup=2, warmup_seconds=0.0, iterations=10, repeats=3)),
    "cpu": (16 << 20, common.Counts(warmup=1, warmup_seconds=0.0, iterations=3, repeats=3)),
}


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    return common.parse_copy_probe_args(argv, "npuwatch chip-to-chip (P2P) bandwidth matrix probe worker", "copy size")


def ordered_pairs(devices: list[int]) -> list[tuple[int, int]]:
    return [(src, dst) for src in devices for dst in devices if src != dst]


def measure_pair(backend: common.Backend, src: int, dst: int, source: Any, target: Any, *,
                 counts: common.Counts) -> dict[str, Any]:
    torch = backend.torch
    delay = common.slow_pair_delay(src, dst)

    def wait_for_both() -> None:
        backend.synchronize_device(src)
        backend.synchronize_device(dst)

    def copy() -> None:
        target.copy_(source)

    common.warm_up(copy, wait_for_both, counts)
    loops = []
    for _ in range(counts.repeats):
        wait_for_both()
        start = time.perf_counter()
        for _ in range(counts.iterations):
            copy()
            if delay:
                wait_for_both()
                time.sleep(delay)
        wait_for_both()
        loops.append(time.perf_counter() - start)
    seconds = min(loops)
    if common.corruption_requested("p2p", src):
        membw.corrupt_one_element(target)
    size_bytes = source.numel() * _INT32_BYTES
    return {
        "src": src,
        "dst": dst,
        "size_bytes": size_bytes,
        "iterations": counts.iterations,
        "repeats": counts.repeats,
        "seconds": seconds,
        "loop_seconds": loops,
        "bytes_per_second": size_bytes * counts.iterations / seconds if seconds > 0 else 0.0,
        "correct": membw.copies_match(torch, target.cpu(), source.cpu()),
    }


def run(args: argparse.Namespace) -> dict[str, Any]:
    def prepare(backend: common.Backend) -> tuple[list[int], int, common.Counts]:
        size_bytes, counts = DEFAULTS[backend.name]
        backend.copy_threads()
        return (common.select_devices(args.devices, backend), args.size_bytes or size_bytes,
                common.resolve_counts(args, counts))

    def execute(backend: common.Backend, plan: tuple[list[int], int, common.Counts], result: dict[str, Any]) -> None:
        devices, size_bytes, counts = plan
        result.update(devices=devices, model=backend.device_name(devices[0]) if devices else None)
        if len(devices) < 2:
            result["skipped"] = f"{len(devices)} device: a device-to-device copy needs at least 2"
            return
        torch = backend.torch
        numel = max(1, size_bytes // _INT32_BYTES)
        # One source and one destination buffer per device, each source with its own data, every
        # buffer written once before any timing (no first-touch page faults inside it).
        sources = {d: membw.random_buffer(torch, numel, backend.device(d)) for d in devices}
        targets = {d: torch.zeros(numel, dtype=torch.int32, device=backend.device(d)) for d in devices}
        for src, dst in ordered_pairs(devices):
            backend.set_device(src)
            result["pairs"].append(measure_pair(backend, src, dst, sources[src], targets[dst], counts=counts))
            common.report_stage("exec", progress=f"{src}->{dst}")

    return common.run_probe("p2p", args.backend, prepare, execute, initial={"pairs": [], "skipped": None})


def main(argv: list[str] | None = None) -> int:
    return common.worker_main(lambda: run(parse_args(argv)))


if __name__ == "__main__":
    sys.exit(main())
