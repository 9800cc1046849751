"""An in-process stand-in for ``DcmiClient.call`` and ``call_batch``: the fake library's formulas
(tests.support.fake_dcmi) answered without a process, with unsupported functions and return codes on
demand. For the unit tests of the DCMI plans, the backend and the collection's fallback."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from agent.dcmi.client import Answer
from collectors.dcmi.errors import DcmiError, DcmiUnsupported, DcmiWorkerError
from tests.support import fake_dcmi as fake

__all__ = ["FakeCalls"]


class FakeCalls:
    """``calls(name, **args)``; ``unsupported``: call names the library lacks; ``codes``: name -> return code;
    ``worker``: name -> a DcmiWorkerError reason (the helper hung or died on it)."""

    def __init__(self, chips: int = 8, per_card: int = 1, *, v2_only: bool = False) -> None:
        self.chips = chips
        self.per_card = per_card
        self.v2_only = v2_only
        self.unsupported: set[str] = set()
        self.codes: dict[str, int] = {}
        self.worker: dict[str, str] = {}
        self.count: Counter[str] = Counter()
        self.batches = 0  # round trips of call_batch
        self.direct = 0  # round trips of call
        # what DcmiClient counts, for agent.dcmi.metrics
        self.starts = 1
        self.restarts = 0
        self.failures = 0
        self.calls = 0
        self.call_seconds_total = 0.0
        self.errors: Counter[str] = Counter()

    def __call__(self, name: str, **args: Any) -> Any:
        self.count[name] += 1
        self.calls += 1
        if name in self.worker:
            raise DcmiWorkerError(self.worker[name], f"the DCMI worker failed on {name}")
        if name in self.unsupported:
            raise DcmiUnsupported((f"dcmi_{name}",))
        if name in self.codes:
            raise DcmiError(self.codes[name], f"dcmi_{name}")
        chip = args.get("chip", 0)
        answers: dict[str, Any] = {
            "chips": lambda: [dict(c, card_id=None, device_id=None) if self.v2_only else c
                              for c in fake.chip_order(self.chips, self.per_card)],
            "health": lambda: fake.expected_health(chip),
            "error_codes": lambda: fake.expected_error_codes(chip),
            "temperature": lambda: fake.expected_temperature(chip),
            "power": lambda: fake.expected_power_tenths(chip),
            "utilization": lambda: fake.expected_utilization(chip, args["input_type"]),
            "utilizations": lambda: [self._each("utilization", chip=c, input_type=args["input_type"])
                                     for c in args["chips"]],
            "frequency": lambda: fake.expected_frequency(chip, args["freq_type"]),
            "hbm": lambda: fake.expected_hbm(chip),
            "memory": lambda: fake.expected_memory(chip),
            "ecc": lambda: fake.expected_ecc(chip, args["memory"]),
            "board": lambda: fake.expected_board(chip),
            "chip_info": lambda: fake.expected_chip_info(chip),
            "pcie": lambda: fake.expected_pcie(chip),
            "processes": lambda: fake.expected_processes(chip),
            "network_health": lambda: fake.expected_network_health(chip),
        }
        return answers[name]()

    def _each(self, name: str, **args: Any) -> dict[str, Any]:
        """One chip's answer inside ``utilizations``' value, as the worker writes it."""
        try:
            return {"ok": True, "value": self(name, **args)}
        except DcmiError as exc:
            return {"ok": False, "error": {"kind": "dcmi", "code": exc.code, "message": str(exc),
                                           "function": exc.function}}
        except DcmiUnsupported as exc:
            return {"ok": False, "error": {"kind": "unsupported", "code": None, "message": str(exc),
                                           "functions": list(exc.functions)}}

    def call(self, name: str, timeout: float | None = None, **args: Any) -> Any:
        """``DcmiClient.call``'s signature."""
        self.direct += 1
        return self(name, **args)

    def call_batch(self, calls: Sequence[tuple[str, Mapping[str, Any]]], timeout: float | None = None) -> list[Answer]:
        """``DcmiClient.call_batch``: a worker failure fails the batch, the library's errors are answers."""
        self.batches += 1
        answers = []
        for name, args in calls:
            try:
                answers.append(Answer(self(name, **args)))
            except DcmiWorkerError:
                raise
            except (DcmiUnsupported, DcmiError) as exc:
                answers.append(Answer(error=exc))
        return answers

    def close(self) -> None:
        pass
