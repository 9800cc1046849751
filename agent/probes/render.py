"""The human summary of a probe result (``npuwatch probe`` without ``--json``)."""

from __future__ import annotations

from collections.abc import Sequence

from agent.probes.records import (
    AllreduceMeasurement,
    BandwidthMeasurement,
    GemmMeasurement,
    ProbeResult,
    SustainedGemmMeasurement,
)

__all__ = ["render"]


def _fmt_rate(value: float | None, scale: float, digits: int = 2) -> str:
    return "-" if value is None else f"{value / scale:.{digits}f}"


def _percent(value: float | None) -> str:
    return "-" if value is None else f"{value:.1%}"


def render(result: ProbeResult) -> str:
    scope = f" ({result.scope} scope)" if result.scope else ""
    lines = [f"{result.probe} probe{scope}: {result.outcome.upper()}"
             f"{' (' + result.backend + ')' if result.backend else ''} in {result.duration_s:.1f} s"
             f"{': ' + result.message if result.message else ''}"]
    if result.gemm:
        lines += _gemm_lines(result.gemm)
    if result.allreduce is not None:
        lines += _allreduce_lines(result.allreduce)
    if result.bandwidth:
        lines += _bandwidth_lines(result.bandwidth)
    if result.sustained:
        lines += _sustained_lines(result.sustained)
    lines += [f"warning: {w}" for w in result.warnings]
    return "\n".join(lines)


def _gemm_lines(measurements: Sequence[GemmMeasurement]) -> list[str]:
    lines = [f"  {'device':>6} {'npu/chip':>8} {'model':<14} {'dtype':<5} {'size':>6} {'TFLOPS':>9} "
             f"{'efficiency':>10} {'correct':>7}"]
    for m in measurements:
        chip, correct = f"{m.npu}/{m.chip}", "yes" if m.correct else "NO"
        lines.append(f"  {m.device:>6} {chip:>8} {m.model[:14]:<14} {m.dtype:<5} {m.size:>6} "
                     f"{_fmt_rate(m.flops, 1e12, 3):>9} {_percent(m.efficiency):>10} {correct:>7}")
    return lines


def _allreduce_lines(ar: AllreduceMeasurement) -> list[str]:
    return [f"  {'ranks':>5} {'bytes':>12} {'time/iter':>11} {'algbw GB/s':>10} {'busbw GB/s':>10} {'correct':>7}",
            f"  {ar.world_size:>5} {ar.size_bytes:>12} {ar.seconds_per_iteration * 1e3:>9.3f}ms "
            f"{_fmt_rate(ar.algbw_bytes_per_second, 1e9, 3):>10} "
            f"{_fmt_rate(ar.busbw_bytes_per_second, 1e9, 3):>10} {'yes' if ar.correct else 'NO':>7}"]


def _bandwidth_lines(cells: Sequence[BandwidthMeasurement]) -> list[str]:
    lines = [f"  {'kind':<5} {'device':>6} {'peer':>4} {'npu/chip':>8} {'bytes':>11} {'GB/s':>9} "
             f"{'expected':>9} {'efficiency':>10} {'vs peers':>8} {'intact':>6}"]
    for c in cells:
        peer = "-" if c.peer is None else str(c.peer)
        lines.append(f"  {c.kind:<5} {c.device:>6} {peer:>4} {f'{c.npu}/{c.chip}':>8} {c.size_bytes:>11} "
                     f"{_fmt_rate(c.bytes_per_second, 1e9):>9} {_fmt_rate(c.expected_bytes_per_second, 1e9):>9} "
                     f"{_percent(c.efficiency):>10} {_percent(c.peer_ratio):>8} {'yes' if c.correct else 'NO':>6}"
                     f"{'  SLOW' if c.flagged else ''}")
    pairs = {(c.device, c.peer): c.bytes_per_second for c in cells if c.peer is not None}
    if pairs:
        devices = sorted({d for pair in pairs for d in pair if d is not None})
        lines.append("  GB/s, row: source, column: destination")
        lines.append("  " + f"{'':>6}" + "".join(f"{d:>9}" for d in devices))
        for src in devices:
            row = "".join(f"{_fmt_rate(pairs.get((src, dst)), 1e9):>9}" for dst in devices)
            lines.append(f"  {src:>6}{row}")
    return lines


def _sustained_lines(measurements: Sequence[SustainedGemmMeasurement]) -> list[str]:
    lines = [f"  {'device':>6} {'npu/chip':>8} {'dtype':<5} {'size':>6} {'windows':>7} {'best':>9} {'median':>9} "
             f"{'worst':>9} {'drop':>6} {'efficiency':>10} {'correct':>7}  (TFLOP/s)"]
    for m in measurements:
        lines.append(f"  {m.device:>6} {f'{m.npu}/{m.chip}':>8} {m.dtype:<5} {m.size:>6} {len(m.windows):>7} "
                     f"{_fmt_rate(m.best_flops, 1e12, 3):>9} {_fmt_rate(m.median_flops, 1e12, 3):>9} "
                     f"{_fmt_rate(m.worst_flops, 1e12, 3):>9} {m.drop_ratio:>6.1%} {_percent(m.efficiency):>10} "
                     f"{'yes' if m.correct else 'NO':>7}")
        series = " ".join(f"{w.flops / 1e12:.4g}" for w in m.windows)
        lines.append(f"    TFLOP/s per window: {series}")
        clocks = [w.clock_hz for w in m.windows if w.clock_hz is not None]
        temps = [w.temperature_celsius for w in m.windows if w.temperature_celsius is not None]
        if clocks:
            lines.append("    GHz per window: " + " ".join(f"{c / 1e9:.2f}" for c in clocks))
        if temps:
            lines.append("    °C per window: " + " ".join(f"{t:.0f}" for t in temps))
    return lines
