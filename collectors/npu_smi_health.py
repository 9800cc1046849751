"""``npu-smi info -t health -i N [-c C]``: health state and active error codes.

Sample output (910A, fault injected)::

    Health Status                  : Alarm
    Error Code                     : A4025021 8C03A000 8C084E00
    Error Information              : ascend_monitor adda heart beat lost error

                                   : node type=adda, sensor type=Heartbeat Sensor, ...

950 and newer drivers print ``Health`` instead of ``Health Status``. Codes are
kept as printed (hex, no ``0x``); ``NA`` means none. Continuation lines (empty
key) are joined to ``error_information`` with newlines.

Exported: ``npu_error_code_active{code,handling}`` = 1 per code, ``handling`` its
level (``collectors.fault_levels``; the context's ``fault_levels`` adds the agent's
history of the code), and ``npu_fault_handling{handling}`` = 1 for the chip's most
severe level (none when the chip has no level). The health state itself is
exported by the info table (``npu_healthy``/``npu_health_state``).

Each code is a series, so only hex words become codes and at most
``LIMITS["error_codes"]`` (64) are kept; the rest are dropped and listed in
``HealthRecord.rejected`` (npu-smi prints a handful).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from collectors.base import ChipRef, CollectContext, Sample, Source
from collectors.bounds import LIMITS, Rejection, Rejects
from collectors.fault_levels import default_table, judge_static
from collectors.npu_smi_kv import KvBlock, chip_argv, chip_sample, one_record, parse_blocks, require_block

__all__ = ["SOURCE", "HealthRecord", "parse", "samples"]

_HEALTH = r"Health(?:\s*Status)?"
_ERROR_CODE = r"Error\s*Code"
_ERROR_INFORMATION = r"Error\s*Information"
# Codes become a label value: accept only hex words so junk cannot create series.
_CODE_RE = re.compile(r"(?:0[xX])?[0-9A-Fa-f]{1,16}")


@dataclass(frozen=True)
class HealthRecord:
    health: str | None = None  # as printed: OK, Warning, Alarm, Critical, ...
    error_codes: tuple[str, ...] = ()
    error_information: str | None = None
    rejected: tuple[Rejection, ...] = ()  # lines and values refused (collectors.bounds)


def _codes(block: KvBlock, rejects: Rejects) -> tuple[str, ...]:
    value = block.text(_ERROR_CODE)
    if value is None:
        return ()
    codes = tuple(dict.fromkeys(tok for tok in value.split() if _CODE_RE.fullmatch(tok)))
    limit = LIMITS["error_codes"]
    if len(codes) > limit:
        rejects.add(f"{len(codes)} error codes, more than {limit}; the first {limit} are kept",
                    *block.where(_ERROR_CODE))
        codes = codes[:limit]
    return codes


def parse(text: str, chip: int | None = None) -> HealthRecord:
    """Parse ``-t health`` output; raises ParseError when no health/error-code key is printed."""
    rejects = Rejects()
    block = require_block(parse_blocks(text, rejects), (_HEALTH, _ERROR_CODE), "health", chip)
    codes = _codes(block, rejects)
    return HealthRecord(
        health=block.text(_HEALTH),
        error_codes=codes,
        error_information=block.text(_ERROR_INFORMATION),
        rejected=rejects.freeze(),
    )


def parse_records(text: str) -> list[HealthRecord]:
    """The Source's parser: a one-element list, as ``Source.parse`` returns a sequence."""
    return [parse(text)]


def samples(records: Sequence[Any] | HealthRecord, chip: ChipRef | None,
            ctx: CollectContext | None = None) -> list[Sample]:
    record = one_record(records, HealthRecord)
    if record is None or chip is None:
        return []
    if ctx is not None and ctx.fault_levels is not None:
        judged = ctx.fault_levels(chip, record.health, record.error_codes)
    else:
        judged = judge_static(default_table(), record.health, record.error_codes)
    out = [chip_sample("npu_error_code_active", chip, 1, code=code, handling=judged.codes[code])
           for code in record.error_codes]
    if judged.chip is not None:
        out.append(chip_sample("npu_fault_handling", chip, 1, handling=judged.chip))
    return out


SOURCE = Source(
    name="npu_smi_health",
    tool="npu-smi",
    group="health",
    scope="chip",
    argv=lambda chip: chip_argv("health", chip),
    parse=parse_records,
    samples=samples,
)
