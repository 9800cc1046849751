"""Read a log line's codes and the runtime's wordings through the packaged error table (collectors.hccl.errtable).

Every code family a CANN job prints: ``E39009:`` (any level+module character), ``ERR00100``
(torch_npu), an ACL number after the words that print one (``error code is 507011``,
``ErrCode=507033``), ``retCode=0x..`` (device task scheduler), ``InnerCode=0x..`` (runtime); and
the wordings: the device error types (``there is an exception of fftsplus aicore error``, ``the
error is ...``, ``err_type=11[...]``), the AI CPU exception's ``errcode:N``, an HCCL call's result
(``error code is 7``, glog ``Check failed: ... HCCL_SUCCESS (7 vs. 0)``) and the literal phrases of
the table. A code of nature ``symptom`` (an envelope such as EZ9999 or 507011), every warning code
and the scheduler and inner codes (details of the ACL number printed with them) are returned apart:
they count only when nothing else in their failure does.
"""

from __future__ import annotations

import re

from collectors.hccl import errtable
from collectors.hccl.errtable import Entry

__all__ = ["CODE_SHAPE_RE", "CODE_TOKENS", "code_matches", "wording_match"]

# The pre-filter for lines that carry nothing but a code family of the table: a CANN code's shape, or one of
# these words. Kept apart from the rules' word list (collectors.hccl.rules): one alternation of both costs
# twice as much on the lines that match neither, which are most lines.
CODE_SHAPE_RE = re.compile(r"[EWI][0-9A-Z]\d{4}")
CODE_TOKENS = ("ERR", "retCode", "InnerCode", "heck failed", "ErrCode")

# Each family is found by a pattern that starts with a character class (the regex engine skips to those
# characters fast); what must come before it is checked on the match: one alternation with look-behinds
# costs several times the scan.
_CODE_RE = re.compile(r"[EWI][0-9A-Z]\d{4}(?![0-9A-Za-z])|ERR\d{5}(?!\d)")
_CANN_END_RE = re.compile(r"\s*(?:[:)\],]|$)")
_NUMBER_RE = re.compile(r"[1-5]\d{5}(?!\d)")
# the words that print an ACL number just before it
_NUMBER_INTRO_RE = re.compile(r"(?:error code is|runtime result =|[Ee]rror[ _]?[Cc]ode\s*[=:]|ErrCode\s*[=:]"
                              r"|ret(?:Code)?\s*[=:]|result\s*=|aclError\s*[=:]?)\s*$")
_HEX_RE = re.compile(r"(retCode|InnerCode)\s*[=:]\s*(0x[0-9A-Fa-f]+)")

_RING_RE = re.compile(r"(?:there is an exception of|there is an error of|the error is|err_type=\d+\[)\s*"
                      r"([a-z][a-z ]*?)\s*(?:[,\]]|$|core id)")
_AICPU_RE = re.compile(r"exception occurred during AICPU execution.*?errcode:\s*(\d+)")
_HCCL_RESULT_RE = re.compile(r"HCCL_SUCCESS \((\d+) vs\. 0\)|(?:HCCL|Hccl)[^,]*error.*?error code is (\d{1,4})(?!\d)")
_PHRASES = tuple((phrase, entry) for phrase, entry in errtable.PHRASES if entry.nature != errtable.SYMPTOM_NATURE)
_PHRASE_RE = re.compile("|".join(re.escape(phrase) for phrase, _ in _PHRASES))
_PHRASE_ENTRY = dict(_PHRASES)


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "_", text.lower()).strip("_")


def code_matches(text: str) -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
    """(causes, symptoms): the (code, category) of each code the line prints, CANN and torch_npu codes first,
    then ACL numbers, then scheduler and inner codes; once each."""
    causes: list[tuple[str, str]] = []
    symptoms: list[tuple[str, str]] = []

    def add(code: str, entry: Entry, symptom: bool) -> None:
        found = symptoms if symptom or entry.nature == errtable.SYMPTOM_NATURE else causes
        if (code, entry.category) not in found:
            found.append((code, entry.category))

    for match in _CODE_RE.finditer(text):
        start, code = match.start(), match.group()
        if start and text[start - 1].isalnum():
            continue
        if code[:3] == "ERR":
            entry = errtable.torch_npu(code)
            if entry.nature != errtable.SYMPTOM_NATURE:  # "ERR00100 PTA call acl api failed" frames the error
                add(code, entry, False)  # printed after it and says nothing of its own
        elif _CANN_END_RE.match(text, match.end()):
            add(code, errtable.cann(code), code[0] != "E")  # a warning is no failure
    for match in _NUMBER_RE.finditer(text):
        start = match.start()
        if _NUMBER_INTRO_RE.search(text, max(0, start - 24), start):
            add(match.group(), errtable.acl(match.group()), False)
    if "Code" in text:
        for match in _HEX_RE.finditer(text):
            # a scheduler or inner code details the ACL number printed with it
            kind, value = match.group(1), match.group(2).lower()
            add(f"{kind}={value}", errtable.ts(value) if kind == "retCode" else errtable.inner(value), True)
    return causes, symptoms


def wording_match(text: str) -> tuple[str, str, bool] | None:
    """The (code, category) of the first wording of the table on a line that no code or rule has read: a device
    error type, an AI CPU errcode, an HCCL call's result, then a literal phrase, and whether it is provisional
    (an HCCL result of class ``other`` counts only when nothing else near does). Phrases of class ``other``
    (``Task run failed``, ``desc=[``) frame an error without saying which: they give nothing."""
    if "AICPU" in text:
        match = _AICPU_RE.search(text)
        if match is not None:
            value = match.group(1)
            listed = errtable.is_listed("aicpu", value)
            entry = errtable.aicpu(value)
            if entry.category == "other":  # an errcode that says nothing more is still an AI CPU exception
                entry = errtable.aicpu("")
            return _useful("aicpu_errcode_" + value if listed else "aicpu_exception", entry)
    if "there is an" in text or "the error is" in text or "err_type=" in text:
        match = _RING_RE.search(text)
        if match is not None:
            kind = errtable.ring(match.group(1))
            if kind is not None:
                return _useful(_slug(match.group(1)), kind)
    if ("vs. 0)" in text or "error code is" in text) and ("HCCL" in text or "Hccl" in text):
        match = _HCCL_RESULT_RE.search(text)
        if match is not None:
            value = match.group(1) or match.group(2)
            listed = errtable.is_listed("hccl_result", value)
            entry = errtable.hccl_result(value)
            return "hccl_result_" + value if listed else "hccl_result", entry.category, entry.category == "other"
    match = _PHRASE_RE.search(text)
    if match is not None:
        entry = _PHRASE_ENTRY[match.group(0)]
        return _useful(entry.fault_class + "_phrase", entry)
    return None


def _useful(code: str, entry: Entry) -> tuple[str, str, bool] | None:
    return None if entry.category == "other" else (code, entry.category, False)
