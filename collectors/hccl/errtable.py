"""The packaged CANN error table (collectors/fault_data/cann_errors.json): every published code's class.

Each lookup gives an ``Entry``: the registry's class, our category (``collectors.hccl.codes.CATEGORIES``)
and its nature (``node``, ``job``, ``program``, ``config``, ``symptom``, ``unknown``). A code that no
registry lists gets its family's default, never nothing: a CANN code by its level+module prefix
(``E3`` AI CPU) or its level, an ACL number by its first digit, the rest by family. The table is
generated (scripts/gen_cann_errors.py); how classes become categories is collectors/hccl/fault_classes.py.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any, NamedTuple

__all__ = [
    "PHRASES",
    "SYMPTOM_NATURE",
    "TABLE_FILE",
    "Entry",
    "acl",
    "aicpu",
    "cann",
    "hccl_result",
    "inner",
    "is_listed",
    "ring",
    "table",
    "torch_npu",
    "ts",
]

SYMPTOM_NATURE = "symptom"
TABLE_FILE = Path(__file__).resolve().parents[1] / "fault_data" / "cann_errors.json"


class Entry(NamedTuple):
    fault_class: str  # the registry's suggested class
    category: str  # ours
    nature: str


def _load() -> dict[str, Any]:
    return json.loads(TABLE_FILE.read_text(encoding="utf-8"))


# A few dozen distinct (class, category, nature) triples serve 1,800 codes: each is one shared Entry, and the
# parsed file is not kept (the tailer's memory stays what it was).
_SHARED: dict[tuple[str, ...], Entry] = {}


def _shared(value: list[str]) -> Entry:
    key = tuple(value)
    entry = _SHARED.get(key)
    if entry is None:
        entry = _SHARED[key] = Entry(*(sys.intern(part) for part in value))
    return entry


def _entries(loaded: dict[str, Any], family: str) -> dict[str, Entry]:
    return {sys.intern(code): _shared(value) for code, value in loaded[family].items()}


_LOADED = _load()
_CANN = _entries(_LOADED, "cann")
_PREFIX = _entries(_LOADED, "cann_prefix")
_ACL = _entries(_LOADED, "acl")
_TS = _entries(_LOADED, "ts")
_INNER = _entries(_LOADED, "inner")
_TORCH = _entries(_LOADED, "torch_npu")
_AICPU = _entries(_LOADED, "aicpu")
_RING = _entries(_LOADED, "ring")
_HCCL = _entries(_LOADED, "hccl_result")
_FAMILIES = {"cann": _CANN, "cann_prefix": _PREFIX, "acl": _ACL, "ts": _TS, "inner": _INNER, "torch_npu": _TORCH,
             "aicpu": _AICPU, "ring": _RING, "hccl_result": _HCCL}
_DEFAULTS = {family: _shared(value) for family, value in _LOADED["defaults"].items() if family != "level"}
_LEVEL = {level: _shared(value) for level, value in _LOADED["defaults"]["level"].items()}
# (phrase, entry) in the table's order
PHRASES: tuple[tuple[str, Entry], ...] = tuple((phrase, _shared(rest)) for phrase, *rest in _LOADED["phrases"])
del _LOADED


def table() -> dict[str, Any]:
    """The whole table, read from the file again (for tests and tools; the lookups keep only their entries)."""
    return _load()


def cann(code: str) -> Entry:
    """A CANN code (``E39009``, ``EZ9999``, ``W11001``): listed, else its prefix's, else its level's class."""
    return _CANN.get(code) or _PREFIX.get(code[:2]) or _LEVEL.get(code[:1]) or _LEVEL["E"]


def acl(number: str) -> Entry:
    """An ACL / runtime / GE return number (``507011``): listed, else its first digit's class."""
    return _ACL.get(number) or _DEFAULTS.get("acl" + number[:1]) or _DEFAULTS["acl5"]


def ts(hex_code: str) -> Entry:
    """A device task-scheduler ``retCode=0x..`` value."""
    return _TS.get(_hex(hex_code)) or _DEFAULTS["ts"]


def inner(hex_code: str) -> Entry:
    """A runtime ``InnerCode=0x07..`` value."""
    return _INNER.get(_hex(hex_code)) or _DEFAULTS["inner"]


def torch_npu(code: str) -> Entry:
    """A torch_npu ``ERRxxyyy`` code."""
    return _TORCH.get(code) or _DEFAULTS["torch_npu"]


def aicpu(errcode: str) -> Entry:
    """The ``errcode:N`` of an AI CPU exception."""
    return _AICPU.get(errcode) or _DEFAULTS["aicpu"]


def ring(printed_as: str) -> Entry | None:
    """A device error type as printed (``fftsplus aicore error``); None for text that is no type."""
    return _RING.get(printed_as)


def hccl_result(value: str) -> Entry:
    """An ``HcclResult`` value (the ``error code is 7`` of a failed HCCL call)."""
    return _HCCL.get(value) or _DEFAULTS["hccl_result"]


def is_listed(family: str, code: str) -> bool:
    """Whether ``code`` is in the table's ``family`` (not only its family's default)."""
    return code in _FAMILIES[family]


def _hex(value: str) -> str:
    try:
        return hex(int(value, 16))
    except ValueError:
        return value.lower()
