"""The DCMI helper's self-metrics: the ``dcmi`` internal job's samples (docs/metrics.md).

The job itself always succeeds: the helper's health is ``npuwatch_dcmi_helper_up``, a warning of its
own, so ``NPUCollectorFailing`` stays about the collectors, which the npu-smi fallback keeps up.
"""

from __future__ import annotations

from collections.abc import Iterable

from agent.core.backend import TOOL
from agent.dcmi.backend import DcmiBackend
from collectors.base import Sample

__all__ = ["ERROR_KINDS", "samples"]

# DcmiClient.errors' kinds: the library's answers, then the helper's failures
ERROR_KINDS = ("unsupported", "dcmi", "invalid", "bad_request", "startup", "timeout", "died", "protocol", "backoff",
               "busy", "closed")


def samples(backend: DcmiBackend, verified: bool | None = None,
            disagreements: Iterable[tuple[str, str]] = ()) -> list[Sample]:
    client = backend.client
    out = [
        Sample("npuwatch_dcmi_helper_up", (), 1.0 if backend.active() else 0.0),
        Sample("npuwatch_dcmi_helper_starts_total", (), float(client.starts)),
        Sample("npuwatch_dcmi_helper_restarts_total", (), float(client.restarts)),
        Sample("npuwatch_dcmi_calls_total", (), float(client.calls)),
        Sample("npuwatch_dcmi_call_seconds_total", (), client.call_seconds_total),
    ]
    errors = dict(client.errors)
    out.extend(Sample("npuwatch_dcmi_call_errors_total", (("kind", kind),), float(errors.get(kind, 0)))
               for kind in (*ERROR_KINDS, *sorted(set(errors) - set(ERROR_KINDS))))
    for source, counts in sorted(dict(backend.last_run).items()):
        for name in (backend.name, TOOL):
            out.append(Sample("npuwatch_collector_backend_readings", (("collector", source), ("backend", name)),
                              float(counts.get(name, 0))))
    for source, count in sorted(dict(backend.fallbacks).items()):
        out.append(Sample("npuwatch_dcmi_fallbacks_total", (("collector", source),), float(count)))
    if verified is not None:
        out.append(Sample("npuwatch_dcmi_unverified", (), 0.0 if verified else 1.0))
    out.extend(Sample("npuwatch_dcmi_field_disagreements", (("collector", source), ("field", field)), 1.0)
               for source, field in sorted(disagreements))
    return out
