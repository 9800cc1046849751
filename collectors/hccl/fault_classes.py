"""How the vendor registries' suggested fault classes become npuwatch's log categories, and what each is.

The reference catalogue (``../shared/reference/cann_errors``) gives every code a suggested class
(``aicore``, ``user_error``, ``notify_wait`` ...). ``category_of_class`` maps it onto a category of
``collectors.hccl.codes.CATEGORIES``; a code the project knows better (``ASCEND_CODE_CATEGORIES``:
EI0015 is the rendezvous, EI0005 a desync) keeps the project's category. ``SYMPTOM_CODES`` and the
``xx9999`` internal codes are envelopes: they say that something failed, not what, so they never
lead over a cause read in the same failure. ``FAMILY_DEFAULTS`` give a code that no registry lists
(one published after the table was made) its family's class. scripts/gen_cann_errors.py applies all
of this when it writes collectors/fault_data/cann_errors.json.
"""

from __future__ import annotations

from collectors.hccl.codes import ASCEND_CODE_CATEGORIES, CATEGORIES, ENVELOPE_CODES

__all__ = ["CLASS_CATEGORIES", "FAMILY_DEFAULTS", "LEVEL_DEFAULTS", "NATURES", "SYMPTOM", "SYMPTOM_CODES",
           "category_of_class", "entry_for", "nature_of"]

# The registry's suggested classes -> our categories.
CLASS_CATEGORIES: dict[str, str] = {
    "connect_timeout": "connect_timeout",
    "exec_timeout": "exec_timeout",
    "notify_wait": "exec_timeout",
    "stream_sync_timeout": "stream_sync_timeout",
    "roce_cqe": "roce_cqe",
    "link": "link",
    "init": "init",
    "tcp_store": "tcp_store",
    "device_oom": "device_oom",
    "memory_other": "device_oom",  # host or device memory the rank could not get: the rank stops the same way
    "aicore": "aicore",
    "aicpu": "aicore",  # an AI CPU task exception stops the rank as an AI Core one does
    "operator": "operator",
    "sdma": "sdma",
    "device_lost": "device_lost",
    "driver": "device_lost",
    "hbm_ecc": "hbm_ecc",
    "user_error": "program_error",
    "config_error": "config_error",
    "other": "other",
}

NATURES = ("node", "job", "program", "config", "symptom", "unknown")
SYMPTOM = "symptom"

# Codes that report that something failed, whose cause is printed elsewhere: the model (stream) execution
# failed, the driver's internal error that a stale handle after a device fault gives, the catch-all internal
# errors and the scheduler's "model stream execute failed".
SYMPTOM_CODES = frozenset({
    "507011", "507899", "500000", "507000", "EE8888", "EU0000",
    "ts:0x91",
})

# Default class per family for codes no registry lists. CANN codes: level+module prefix first
# (``prefix_families.csv``, copied by the generator), then the level alone.
LEVEL_DEFAULTS: dict[str, str] = {"E": "other", "W": "other", "I": "other"}
FAMILY_DEFAULTS: dict[str, str] = {
    "acl1": "user_error",  # 1xxxxx: an environment or program error the user can fix
    "acl2": "memory_other",  # 2xxxxx: a resource shortage or an API the hardware lacks
    "acl3": "other",  # 3xxxxx: a queue full or empty
    "acl4": "other",
    "acl5": "other",  # 5xxxxx: the device failed inside
    "ts": "other",
    "inner": "other",
    "torch_npu": "other",
    "aicpu": "aicpu",
    "ring": "aicore",
    "hccl_result": "other",
}


def category_of_class(fault_class: str) -> str:
    """Our category for a registry class (``other`` for a class we do not know)."""
    return CLASS_CATEGORIES.get(fault_class, "other")


_NATURE_OF_CATEGORY = {c.name: c.nature for c in CATEGORIES}


def nature_of(category: str) -> str:
    return _NATURE_OF_CATEGORY.get(category, "unknown")


def _is_symptom(code: str) -> bool:
    if code in SYMPTOM_CODES or code in ENVELOPE_CODES:
        return True
    # xx9999: a module's internal-error envelope; torch_npu's ERRxx100/200/300 wrap a failed ACL, HCCL or GE
    # call and ERRxx999 an application exception
    return (len(code) == 6 and code[0] in "EWI" and code.endswith("9999")) or (
        code.startswith("ERR") and code.endswith(("100", "200", "300", "999")))


def entry_for(code: str, fault_class: str) -> tuple[str, str, str]:
    """(registry class, category, nature) of one code: the project's own category where it has one."""
    category = ASCEND_CODE_CATEGORIES.get(code) or category_of_class(fault_class)
    if code in ENVELOPE_CODES:
        category = "other"  # the line's text says what failed inside the module
    nature = SYMPTOM if _is_symptom(code) else nature_of(category)
    return fault_class, category, nature
