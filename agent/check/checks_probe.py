"""Medium and long checks built on the probe workers: GEMM, device copy, host link, chip pairs,
node all-reduce, sustained GEMM. Each runs its probe (``agent.probes``) and judges every measurement
against its references (``agent.check.references``), one result per chip, direction or pair. A result past
the probe limits (``agent.health.probe_limits``) is the fault kind ``probe_failed`` (FAIL) or ``probe_slow``
(WARN), whose label, hint and runbook (that probe's own) every surface shows.
"""

from __future__ import annotations

import dataclasses
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from agent.check.references import Judgement, judge, references_for
from agent.health import faults
from agent.health.probe_limits import CLOCK_WARN
from agent.health.results import CheckResult, Result, fold
from agent.health.status import FAIL, PASS, UNKNOWN, WARN
from agent.health.thresholds import fault_kind

if TYPE_CHECKING:
    from agent.check.device import DeviceRun
    from agent.probes.records import ProbeResult

__all__ = ["allreduce", "gemm", "hbm_bandwidth", "host_bandwidth", "p2p_bandwidth", "sustained_gemm"]

_T, _G = 1e12, 1e9
_NO_REFERENCE_HINT = ("nothing to compare this model with: give fleet medians (--baseline FILE from "
                      "`npuwatch check-baseline`, or --prometheus URL) or check.references")
_SLOW_HINT = fault_kind("probe_slow").hint


def _kinded(result: Result) -> Result:
    """The result as its probe fault kind; one that names its own (a chip too hot under load) keeps it."""
    if result.kind is not None or result.status not in (FAIL, WARN):
        return result
    return replace(result, kind="probe_failed" if result.status == FAIL else "probe_slow")


def _fold(name: str, results: list[Result], ok_text: str, hint: str = "", **kwargs: Any) -> CheckResult:
    return fold(name, [_kinded(result) for result in results], ok_text, hint, **kwargs)


def _failed(name: str, text: str, hint: str, **fields: Any) -> CheckResult:
    """A probe check that failed as a whole (a hang, wrong sums, nothing measured)."""
    return CheckResult(name, FAIL, text, (Result(FAIL, text, kind="probe_failed", **fields),), hint)


def _where(npu: int, chip: int, multi: bool) -> str:
    return f"NPU {npu} chip {chip}" if multi else f"NPU {npu}"


def _multi(run: DeviceRun) -> bool:
    return run.readings.node.multi_chip()


def _ran_short(run: DeviceRun, result: ProbeResult, budget_s: float) -> bool:
    """Whether the run was killed by a deadline the level's budget set (not the configured one)."""
    return result.outcome == "timeout" and budget_s < float(run.config.probes.deadline)


def _not_judged(name: str, run: DeviceRun, result: ProbeResult, budget_s: float, measured: bool
                ) -> CheckResult | None:
    """The check's result when the probe gave nothing to judge (error, skipped, a timeout)."""
    text = f"{result.outcome}{' at ' + result.stage if result.stage else ''}: {result.message or 'no reason given'}"
    if result.outcome in ("error", "skipped"):
        return CheckResult(name, UNKNOWN, text, (Result(UNKNOWN, text),),
                           "a probe that could not run says nothing about the hardware; see `npuwatch probe --help`")
    if result.outcome == "timeout":
        if _ran_short(run, result, budget_s):
            why = f"did not finish in the {budget_s:.0f}s left of the level's budget ({text})"
            return CheckResult(name, UNKNOWN, why, (Result(UNKNOWN, why),))
        return _failed(name, text, "a device that hangs a probe hangs jobs: check dmesg and npu-smi, reset the chip")
    if result.outcome == "fail" and not measured:
        return _failed(name, text, fault_kind("probe_failed").hint_for(name))
    return None


def _fleet(run: DeviceRun, model: str | None, measure: str) -> Any:
    if run.baseline is None:
        return None
    return run.baseline.reference(model, measure, run.settings.thresholds.fleet_min_nodes)


def _judge(run: DeviceRun, model: str | None, measure: str, value: float) -> Judgement:
    refs = references_for(model, measure, configured=run.settings.references, peaks=run.settings.peaks,
                          fleet=_fleet(run, model, measure))
    return judge(value, refs, run.settings.thresholds)


def _remaining(run: DeviceRun) -> float:
    return run.remaining()


# ----------------------------------------------------------------------------- GEMM


def gemm(run: DeviceRun) -> list[CheckResult]:
    from agent.probes.runner import run_gemm

    budget = _remaining(run)
    result = run_gemm(run.probe_settings(budget))
    done = _not_judged("gemm", run, result, budget, bool(result.gemm))
    if done is not None:
        return [done]
    multi = _multi(run)
    results = []
    for m in result.gemm:
        where = f"{_where(m.npu, m.chip, multi)} {m.dtype}"
        measure = f"gemm:{m.dtype}"
        fields: dict[str, Any] = {"npu": m.npu, "chip": m.chip, "value": m.flops, "unit": "flop_per_second",
                                  "measure": measure, "model": m.model or None}
        if not m.correct:
            results.append(Result(FAIL, f"{where}: wrong product (residual {m.residual_ratio:.3g}x the tolerance)",
                                  basis="float64 reference (Freivalds' test)", **fields))
            continue
        verdict = _judge(run, m.model, measure, m.flops)
        status = PASS if verdict.status == UNKNOWN else verdict.status
        basis = verdict.basis if verdict.status != UNKNOWN else f"product correct; {verdict.basis}"
        results.append(Result(status, f"{where}: {m.flops / _T:.3f} TFLOP/s, product correct",
                              threshold=verdict.threshold, basis=basis, **fields))
    return [_fold("gemm", results, f"{len(results)} GEMM runs correct and at the reference", _SLOW_HINT)]


# ----------------------------------------------------------------------------- copies


def _cell_result(run: DeviceRun, cell: Any, measure: str, min_peer_ratio: float, peers: int) -> Result:
    multi = _multi(run)
    where = _where(cell.npu, cell.chip, multi)
    if cell.peer is not None:
        where += f" -> {_where(cell.peer_npu, cell.peer_chip, multi)}"
    fields: dict[str, Any] = {"npu": cell.npu, "chip": cell.chip, "peer": cell.peer_npu, "value": cell.bytes_per_second,
                              "unit": "bytes_per_second", "measure": measure, "model": cell.model or None}
    rate = f"{cell.bytes_per_second / _G:.2f} GB/s"
    if not cell.correct:
        return Result(FAIL, f"{where}: data corrupted in the copy", basis="the bytes written", **fields)
    verdict = _judge(run, cell.model, measure, cell.bytes_per_second)
    status, threshold, basis = verdict.status, verdict.threshold, verdict.basis
    if cell.peer_ratio is not None:
        median = cell.bytes_per_second / cell.peer_ratio
        peer_status = FAIL if cell.peer_ratio < min_peer_ratio else PASS
        peer_basis = f"{min_peer_ratio:.0%} of the median {median / _G:.2f} GB/s of this run's {peers} cells"
        if status == UNKNOWN or (peer_status == FAIL and status != FAIL):
            status, threshold, basis = peer_status, min_peer_ratio * median, peer_basis
    text = f"{where}: {rate}" + (f" ({basis})" if status == UNKNOWN else "")
    return Result(status, text, threshold=threshold, basis=basis, **fields)


def _copy_checks(run: DeviceRun, probe: str, names: dict[str, str]) -> list[CheckResult]:
    """Run copy probe ``probe`` and judge its cells by kind: ``names`` maps a cell kind to its check."""
    from agent.probes import bandwidth

    budget = _remaining(run)
    settings = run.probe_settings(budget)
    if run.settings.copy_bytes is not None:
        settings = dataclasses.replace(settings, copy_bytes=run.settings.copy_bytes)
    result = {"membw": bandwidth.run_membw, "h2d": bandwidth.run_h2d, "p2p": bandwidth.run_p2p}[probe](settings)
    checks = []
    for kind, name in names.items():
        cells = [cell for cell in result.bandwidth if cell.kind == kind]
        done = _not_judged(name, run, result, budget, bool(cells))
        if done is not None:
            checks.append(done)
            continue
        results = [_cell_result(run, cell, name, settings.min_peer_ratio, len(cells)) for cell in cells]
        hint = _NO_REFERENCE_HINT if all(r.status in (PASS, UNKNOWN) for r in results) else _SLOW_HINT
        checks.append(_fold(name, results, f"{len(results)} {kind} copies intact and at the reference", hint,
                           empty=f"the {probe} probe measured no {kind} copy"))
    return checks


def hbm_bandwidth(run: DeviceRun) -> list[CheckResult]:
    return _copy_checks(run, "membw", {"membw": "hbm_bandwidth"})


def host_bandwidth(run: DeviceRun) -> list[CheckResult]:
    return _copy_checks(run, "h2d", {"h2d": "h2d_bandwidth", "d2h": "d2h_bandwidth"})


def p2p_bandwidth(run: DeviceRun) -> list[CheckResult]:
    return _copy_checks(run, "p2p", {"p2p": "p2p_bandwidth"})


# ----------------------------------------------------------------------------- all-reduce


def allreduce(run: DeviceRun) -> list[CheckResult]:
    from agent.probes.runner import run_allreduce

    budget = _remaining(run)
    result = run_allreduce(run.probe_settings(budget), scope="node")
    measured = result.allreduce
    done = _not_judged("allreduce", run, result, budget, measured is not None)
    if done is not None:
        return [done]
    assert measured is not None
    fields: dict[str, Any] = {"value": measured.busbw_bytes_per_second, "unit": "bytes_per_second",
                              "measure": "allreduce", "model": run.model()}
    text = (f"{measured.world_size} ranks, busbw {measured.busbw_bytes_per_second / _G:.2f} GB/s at "
            f"{measured.size_bytes} bytes")
    if not measured.correct:
        return [_failed("allreduce", f"wrong sums: {result.message}",
                        "a wrong collective result is a hardware or driver fault: run it again, then a node-level "
                        "reset", basis="the expected sums", **fields)]
    verdict = _judge(run, fields["model"], "allreduce", measured.busbw_bytes_per_second)
    results = []
    minimum = run.settings.min_bus_bandwidth
    if minimum is not None:
        status = FAIL if measured.busbw_bytes_per_second < minimum else PASS
        results.append(Result(status, text, threshold=minimum, basis="config probes.allreduce.min_bus_bandwidth",
                              **fields))
    if verdict.status != UNKNOWN or not results:
        status = PASS if verdict.status == UNKNOWN else verdict.status
        basis = verdict.basis if verdict.status != UNKNOWN else f"sums correct; {verdict.basis}"
        results.append(Result(status, text, threshold=verdict.threshold, basis=basis, **fields))
    return [_fold("allreduce", results, text, fault_kind("probe_slow").hint_for("allreduce"))]


# ----------------------------------------------------------------------------- sustained GEMM


def sustained_gemm(run: DeviceRun) -> list[CheckResult]:
    from agent.check.watch import Watcher
    from agent.probes.sustained import run_sustained_gemm

    budget = _remaining(run)
    base = run.probe_settings(budget)
    # cpu: 10 s by default, npu/cuda 180 s (the worker's defaults), within what the budget leaves
    wanted = run.settings.sustained_s or (10.0 if base.backend == "cpu" else 180.0)
    seconds = max(5.0, min(wanted, budget - 30.0))
    # the sustained worker runs one dtype: the first configured one, else its default
    settings = dataclasses.replace(base, sustained_s=seconds, max_throttle_drop=run.settings.max_throttle_drop,
                                   warn_throttle_drop=run.settings.warn_throttle_drop,
                                   gemm_dtypes=base.gemm_dtypes[:1] if base.gemm_dtypes else None)
    watcher = Watcher(run.tools, list(run.readings.node.chips), max(2.0, seconds / 30.0)).start()
    try:
        result = run_sustained_gemm(settings)
    finally:
        watched = watcher.stop()
    done = _not_judged("sustained_gemm", run, result, budget, bool(result.sustained))
    if done is not None:
        return [done]
    multi = _multi(run)
    by_chip = {(m.npu, m.chip): m for m in result.sustained}
    results: list[Result] = []
    for ref, seen in sorted(watched.items()):
        where = _where(ref.npu, ref.chip, multi)
        results.extend(_watch_results(run, ref.npu, ref.chip, where, seen))
        measured = by_chip.pop((ref.npu, ref.chip), None)
        if measured is not None:
            results.extend(_sustained_results(run, measured, where, settings))
    for (npu, chip), measured in sorted(by_chip.items()):  # a device npu-smi does not list (cpu, cuda runs)
        results.extend(_sustained_results(run, measured, _where(npu, chip, multi), settings))
    return [_fold("sustained_gemm", results, f"{seconds:.0f}s of GEMM without throttling on {len(watched)} chips",
                  fault_kind("probe_slow").hint_for("sustained_gemm"))]


def _watch_results(run: DeviceRun, npu: int, chip: int, where: str, seen: Any) -> list[Result]:
    out = []
    judging = run.settings.judging
    if seen.max_temperature is not None:
        power = f", up to {seen.max_power:.0f} W" if seen.max_power is not None else ""
        hot = faults.temperature(seen.max_temperature, max_celsius=judging.max_temperature,
                                 basis=judging.max_temperature_basis, npu=npu, chip=chip)
        out.append(replace(hot, evidence=f"{where}: up to {seen.max_temperature:g} C under load{power}"
                                         + (f" ({hot.evidence})" if hot.kind else "")))
    elif seen.errors:
        out.append(Result(UNKNOWN, f"{where}: npu-smi -t common did not answer while under load", npu=npu, chip=chip))
    if seen.min_busy_clock is not None and seen.rated_clock:
        floor = CLOCK_WARN.value * seen.rated_clock
        status = WARN if seen.min_busy_clock < floor else PASS
        out.append(Result(status, f"{where}: AI Core clock down to {seen.min_busy_clock / 1e6:.0f} MHz while busy "
                                  f"(rated {seen.rated_clock / 1e6:.0f} MHz)", npu=npu, chip=chip,
                          value=seen.min_busy_clock, threshold=floor, unit="hertz",
                          basis=f"{CLOCK_WARN.value:.0%} of the rated clock"))
    return out


def _sustained_results(run: DeviceRun, m: Any, where: str, settings: Any) -> list[Result]:
    from agent.probes.sustained import describe_drop

    fields: dict[str, Any] = {"npu": m.npu, "chip": m.chip}
    if not m.correct:
        return [Result(FAIL, f"{where}: wrong product after sustained load (residual {m.residual_ratio:.3g}x)",
                       basis="float64 reference (Freivalds' test)", **fields)]
    drop_status = FAIL if m.drop_ratio > settings.max_throttle_drop else (
        WARN if m.drop_ratio > settings.warn_throttle_drop else PASS)
    out = [Result(drop_status, f"{where}: {describe_drop(m)}" if drop_status != PASS else
                  f"{where}: slowest window {m.drop_ratio:.0%} under the best", value=m.drop_ratio,
                  threshold=settings.max_throttle_drop, unit="ratio", basis="config check.max_throttle_drop",
                  **fields)]
    measure = f"sustained_gemm:{m.dtype}"
    verdict = _judge(run, m.model, measure, m.median_flops)
    if verdict.status != UNKNOWN:
        out.append(Result(verdict.status, f"{where}: median {m.median_flops / _T:.3f} TFLOP/s under load",
                          value=m.median_flops, threshold=verdict.threshold, unit="flop_per_second",
                          basis=verdict.basis, measure=measure, model=m.model or None, **fields))
    else:
        out.append(Result(PASS, f"{where}: median {m.median_flops / _T:.3f} TFLOP/s under load",
                          value=m.median_flops, unit="flop_per_second", basis=verdict.basis, measure=measure,
                          model=m.model or None, **fields))
    return out

