"""``npuwatch probe gemm|allreduce|membw|h2d|p2p|sustained-gemm``: run a probe now, under the agent's lock.

gemm and allreduce are the agent's scheduled probes. membw (device memory copy), h2d (host
<-> device), p2p (every ordered pair of devices) and sustained-gemm (minutes under load,
FLOP/s per window, for throttling) are the longer checks, run on demand.

Exit status is Nagios style: 0 pass, 1 pass with a warning, 2 fail or timeout, 3 error or
skipped (could not check). ``--json`` prints the whole result on stdout; a progress line
goes to stderr when stderr is a terminal.

Cluster scope (run the same command on every node, e.g. from a Slurm job step or a
Kubernetes indexed Job, with the node's index as ``--node-rank``)::

    npuwatch probe allreduce --scope cluster --nnodes 4 --node-rank $SLURM_NODEID \\
        --master $MASTER_HOST:29500
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import time
from typing import Any, TextIO

from agent.core.config import ConfigError, load_config, parse_size
from agent.core.flag_values import duration_flag, positive_duration_flag
from agent.health.probe_limits import PEER_FAIL, REFERENCE_FAIL, THROTTLE_FAIL
from agent.probes.bandwidth import run_h2d, run_membw, run_p2p
from agent.probes.records import ProbeSettings, settings_from_config
from agent.probes.render import render
from agent.probes.runner import run_allreduce, run_gemm
from agent.probes.sustained import run_sustained_gemm

__all__ = ["add_arguments", "main"]


def _positive_int(text: str) -> int:
    value = int(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}")
    return value


def _positive_float(text: str) -> float:
    value = float(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"expected a positive number, got {text!r}")
    return value


def _ratio(text: str) -> float:
    value = float(text)
    if not 0 <= value <= 1:
        raise argparse.ArgumentTypeError(f"expected a ratio between 0 and 1, got {text!r}")
    return value


def _bytes(text: str) -> int:
    try:
        return parse_size(text if not text.isdigit() else int(text))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a size like 256MiB, got {text!r}") from None


def _devices(text: str) -> tuple[int, ...] | str:
    if text == "all":
        return text
    try:
        return tuple(int(part) for part in text.split(",") if part.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected 'all' or indices like 0,1,2, got {text!r}") from None


def _dtypes(text: str) -> tuple[str, ...]:
    values = tuple(part.strip() for part in text.split(",") if part.strip())
    unknown = [v for v in values if v not in ("fp16", "bf16", "fp32")]
    if unknown:
        raise argparse.ArgumentTypeError(f"unknown dtype(s) {unknown}; expected fp16, bf16, fp32")
    return values


for _converter, _name in ((_positive_int, "positive integer"), (_positive_float, "positive number"),
                          (_ratio, "ratio"), (_bytes, "size"), (_devices, "device list"),
                          (_dtypes, "dtypes")):
    _converter.__name__ = _name  # argparse quotes this name in its errors


PROBE_CHOICES = ("gemm", "allreduce", "membw", "h2d", "p2p", "sustained-gemm")
_COPY_PROBES = ("membw", "h2d", "p2p")
_SUSTAINED_DEFAULT_S = 180.0  # the worker's npu/cuda default duration
_SUSTAINED_DEADLINE_MARGIN_S = 120.0  # start-up, warm-up and the final check on top of the duration


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Attach the probe flags to the ``probe`` subparser (every default None = config/worker default)."""
    parser.add_argument("probe", choices=PROBE_CHOICES, help="which probe to run")
    parser.add_argument("--config", "--config.file", dest="config", metavar="FILE",
                        help="YAML config file whose probes section supplies the defaults")
    parser.add_argument("--backend", choices=("auto", "npu", "cuda", "cpu"),
                        help="auto: npu if torch_npu sees devices, else cuda, else cpu")
    parser.add_argument("--devices", type=_devices, metavar="LIST", help="'all' (default) or indices: 0,1,2")
    parser.add_argument("--python", metavar="PATH", help="probe interpreter (the training env's python)")
    parser.add_argument("--json", action="store_true", help="print the result as one JSON object on stdout")
    parser.add_argument("--model",
                        help="chip model for the efficiency baseline (default: torch's device name)")
    sizes = parser.add_argument_group("sizes")
    sizes.add_argument("--size", type=_positive_int, metavar="N",
                       help="GEMM matrix size (npu/cuda 8192; cpu 1024, sustained-gemm 512)")
    sizes.add_argument("--dtypes", type=_dtypes, metavar="LIST",
                       help="GEMM dtypes: fp16,bf16,fp32 (sustained-gemm: one)")
    sizes.add_argument("--bytes", dest="message_bytes", type=_bytes, metavar="SIZE",
                       help="all-reduce message (npu/cuda 256MiB, cpu 8MiB) or copy buffer size (membw "
                            "npu/cuda 1GiB, cpu 64MiB; h2d and p2p npu/cuda 256MiB, cpu 32MiB / 16MiB)")
    sizes.add_argument("--duration", type=positive_duration_flag, metavar="DURATION",
                       help="sustained-gemm: seconds under load (npu/cuda 180, cpu 10)")
    sizes.add_argument("--window", type=positive_duration_flag, metavar="DURATION",
                       help="sustained-gemm: seconds per FLOP/s window (npu/cuda 10, cpu 1)")
    sizes.add_argument("--warmup", type=int, metavar="N", help="untimed iterations (at least)")
    sizes.add_argument("--warmup-seconds", dest="warmup_s", type=duration_flag, metavar="DURATION",
                       help="untimed seconds (at least; npu/cuda 1 s): clocks ramp up under load")
    sizes.add_argument("--iterations", type=_positive_int, metavar="N", help="timed iterations per loop")
    sizes.add_argument("--repeats", type=_positive_int, metavar="N",
                       help="timed loops; the fastest one counts (default 3)")
    sizes.add_argument("--ranks", type=_positive_int, metavar="N",
                       help="cpu backend: ranks per node (default 2)")
    limits = parser.add_argument_group("time limits and thresholds")
    limits.add_argument("--deadline", type=positive_duration_flag, metavar="DURATION",
                        help="outer watchdog: kill the probe's processes after this long")
    limits.add_argument("--stall", type=positive_duration_flag, metavar="DURATION",
                        help="kill the probe after this long in connect/exec without progress")
    limits.add_argument("--connect-timeout", type=positive_duration_flag, metavar="DURATION",
                        help="HCCL_CONNECT_TIMEOUT (HCCL accepts 120..7200)")
    limits.add_argument("--exec-timeout", type=positive_duration_flag, metavar="DURATION",
                        help="HCCL_EXEC_TIMEOUT (HCCL accepts 68..17340)")
    limits.add_argument("--min-efficiency", type=_ratio, metavar="RATIO",
                        help=f"fail below this share of a measured peak (default {REFERENCE_FAIL.value:g})")
    limits.add_argument("--min-busbw", type=_positive_float, metavar="BYTES_PER_S",
                        help="fail below this all-reduce bus bandwidth")
    limits.add_argument("--min-peer-ratio", type=_ratio, metavar="RATIO",
                        help="membw/h2d/p2p: fail a cell below this share of the median of its peers "
                             f"(default {PEER_FAIL.value:g})")
    limits.add_argument("--max-drop", type=_ratio, metavar="RATIO",
                        help="sustained-gemm: fail when a window falls this far below the best "
                             f"(default {THROTTLE_FAIL.value:g})")
    limits.add_argument("--lock-file", metavar="PATH", help="the probe lock shared with the agent")
    limits.add_argument("--no-lock", action="store_true", help="do not take the probe lock")
    cluster = parser.add_argument_group("all-reduce scope")
    cluster.add_argument("--scope", choices=("node", "cluster"), default="node")
    cluster.add_argument("--nnodes", type=_positive_int, default=1, help="nodes in a cluster probe")
    cluster.add_argument("--node-rank", type=int, default=0, help="this node's index, 0..nnodes-1")
    cluster.add_argument("--master", metavar="HOST:PORT", help="rank 0's node and a free port on it")


def _settings(args: argparse.Namespace, base: ProbeSettings) -> ProbeSettings:
    copy_probe = args.probe in _COPY_PROBES
    flags = {
        "backend": args.backend, "python": args.python, "model": args.model, "gemm_size": args.size,
        "gemm_dtypes": args.dtypes, "allreduce_bytes": args.message_bytes if args.probe == "allreduce" else None,
        "copy_bytes": args.message_bytes if copy_probe else None, "warmup": args.warmup,
        "sustained_s": args.duration, "window_s": args.window, "min_peer_ratio": args.min_peer_ratio,
        "max_throttle_drop": args.max_drop,
        "warmup_s": args.warmup_s, "iterations": args.iterations, "repeats": args.repeats,
        "deadline_s": args.deadline, "stall_s": args.stall,
        "connect_timeout_s": args.connect_timeout, "exec_timeout_s": args.exec_timeout,
        "min_efficiency": args.min_efficiency, "min_busbw": args.min_busbw, "lock_path": args.lock_file,
        "cpu_ranks": args.ranks,
    }
    changes: dict[str, Any] = {k: v for k, v in flags.items() if v is not None}
    if args.devices is not None:
        changes["devices"] = None if args.devices == "all" else args.devices
    if args.no_lock:
        changes["use_lock"] = False
    if args.probe == "sustained-gemm" and args.deadline is None:
        # The outer watchdog must outlast the load it asked for.
        wanted = (args.duration or _SUSTAINED_DEFAULT_S) + _SUSTAINED_DEADLINE_MARGIN_S
        changes["deadline_s"] = max(base.deadline_s, wanted)
    return dataclasses.replace(base, **changes)


class _Progress:
    """One self-rewriting stderr line: which stage each rank has reached."""

    def __init__(self, probe: str, stream: TextIO) -> None:
        self._probe = probe
        self._stream = stream
        self._stages: dict[int, str] = {}
        self._workers = 0
        self._start = time.monotonic()

    def __call__(self, event: dict[str, Any]) -> None:
        if event.get("kind") == "start":
            self._workers = int(event["workers"])
        elif event.get("kind") == "stage":
            self._stages[int(event["worker"])] = str(event["stage"])
        counts: dict[str, int] = {}
        for stage in self._stages.values():
            counts[stage] = counts.get(stage, 0) + 1
        summary = ", ".join(f"{stage} {n}/{self._workers}" for stage, n in sorted(counts.items()))
        elapsed = time.monotonic() - self._start
        self._stream.write(f"\r\033[K{self._probe}: {summary or 'starting'} ({elapsed:.1f} s)")
        self._stream.flush()

    def close(self) -> None:
        self._stream.write("\r\033[K")
        self._stream.flush()


def main(args: argparse.Namespace, base: ProbeSettings | None = None) -> int:
    """Run the probe named in ``args``; ``base`` (e.g. from the agent's config) supplies defaults."""
    if base is None:
        if getattr(args, "config", None):
            try:
                base = settings_from_config(load_config(args.config))
            except ConfigError as exc:
                print(f"npuwatch probe: {exc}", file=sys.stderr)
                return 3
        else:
            base = ProbeSettings()
    settings = _settings(args, base)
    if args.probe != "allreduce" and args.scope != "node":
        print("npuwatch probe: --scope applies to allreduce only", file=sys.stderr)
        return 3
    if args.probe == "sustained-gemm" and args.dtypes and len(args.dtypes) > 1:
        print("npuwatch probe: sustained-gemm runs one dtype", file=sys.stderr)
        return 3
    if args.scope == "cluster" and not args.master:
        print("npuwatch probe: --scope cluster needs --master HOST:PORT", file=sys.stderr)
        return 3
    progress = _Progress(args.probe, sys.stderr) if sys.stderr.isatty() else None
    try:
        if args.probe == "allreduce":
            result = run_allreduce(settings, scope=args.scope, nnodes=args.nnodes, node_rank=args.node_rank,
                                   master=args.master, on_event=progress)
        else:
            runners = {"gemm": run_gemm, "membw": run_membw, "h2d": run_h2d, "p2p": run_p2p,
                       "sustained-gemm": run_sustained_gemm}
            result = runners[args.probe](settings, on_event=progress)
    finally:
        if progress is not None:
            progress.close()
    if args.json:
        print(json.dumps(result.to_dict(), indent=2, sort_keys=True))
    else:
        print(render(result))
    return result.exit_code
