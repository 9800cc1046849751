"""The library's return codes and the errors raised for them, on both sides of the worker's pipe.

A call can fail four ways, and the agent treats each differently: the library lacks the function
(``DcmiUnsupported``: that reading is off for good, on this driver), the function returned an error
code (``DcmiError``: -8012 means try again later, -8255 that the chip has no such reading), the
library answered something no chip can mean (``DcmiInvalid``), or the worker process itself failed
(``DcmiWorkerError``: timed out, died, could not start; raised by the client only).

The worker runs on Python 3.8: nothing here may need a newer interpreter.
"""

from __future__ import annotations

__all__ = [
    "NOT_SUPPORTED_CODES",
    "RETRY_CODES",
    "RETURN_CODES",
    "DcmiBadRequest",
    "DcmiCallHung",
    "DcmiError",
    "DcmiInvalid",
    "DcmiUnsupported",
    "DcmiWorkerError",
    "check",
    "meaning",
]

SUCCESS = 0
# From the reference header set's documentation (shared/reference/README.md, "dcmi/").
RETURN_CODES: dict[int, str] = {
    -8001: "invalid parameter",
    -8002: "permission denied",
    -8006: "timed out",
    -8012: "not ready, try again",
    -8013: "not supported in a container",
    -8255: "not supported on this chip",
}
RETRY_CODES = frozenset({-8006, -8012})
NOT_SUPPORTED_CODES = frozenset({-8013, -8255})


def meaning(code: int) -> str:
    """What a return code means; an unlisted code is named as such, never guessed at."""
    return RETURN_CODES.get(code, f"error {code}")


class DcmiError(Exception):
    """A library function returned a nonzero code."""

    def __init__(self, code: int, function: str = "") -> None:
        self.code = code
        self.meaning = meaning(code)
        self.function = function
        where = f"{function}: " if function else ""
        super().__init__(f"{where}{self.meaning} ({code})")

    @property
    def retryable(self) -> bool:
        """The library asks to be asked again (not ready, timed out)."""
        return self.code in RETRY_CODES

    @property
    def not_supported(self) -> bool:
        """This chip, or this container, has no such reading: asking again will not help."""
        return self.code in NOT_SUPPORTED_CODES


class DcmiUnsupported(Exception):
    """The library has none of the functions a reading needs (an older or newer driver)."""

    def __init__(self, functions: tuple[str, ...]) -> None:
        self.functions = tuple(functions)
        super().__init__(f"libdcmi.so has no {' or '.join(self.functions)}")


class DcmiInvalid(Exception):
    """The library answered a value no chip can have (a negative count, a count beyond the buffer)."""


class DcmiBadRequest(Exception):
    """The worker was asked for a call it does not know, or with arguments it cannot use."""


class DcmiCallHung(Exception):
    """One call did not return within its limit, or its function is being skipped after doing so.

    The worker answered for the hung call and runs on (``kind`` ``timeout``); the agent then skips that
    call for a backoff and the tool serves its readings meanwhile (``kind`` ``backoff``, raised by the
    client without asking the worker).
    """

    def __init__(self, call: str, kind: str, message: str) -> None:
        self.call = call
        self.kind = kind
        super().__init__(message)


class DcmiWorkerError(Exception):
    """The worker process failed: it did not start, it overran the deadline, or it died.

    ``reason`` is one of ``startup``, ``timeout``, ``died``, ``protocol``, ``backoff``, ``busy``.
    """

    def __init__(self, reason: str, message: str, code: int | None = None) -> None:
        self.reason = reason
        self.code = code
        super().__init__(message)


def check(function: str, code: int) -> None:
    """Raise ``DcmiError`` for a nonzero return code."""
    if code != SUCCESS:
        raise DcmiError(code, function)
