"""``DcmiBackend``: the collection's ``RecordReader`` over the DCMI helper (``DcmiClient``).

It reads the sources ``collectors.dcmi.plans`` covers, for the chip a source asks about, and hands
back the records the source's npu-smi (or hccn_tool) parser would return; any DCMI problem becomes a
``Fallback`` and the tool serves that reading. The chip's logical id comes from the library's own
chip list (card/device pair -> logical id), else from the ChipRef (``npu-smi info -m``).

A plan's calls go to the helper in one batch (one round trip per source and chip): the backend
remembers which calls a plan made last time, for that source and chip, sends them together and
replays the plan over the answers; a call it did not foresee (the first read, a plan that took
another branch) goes on its own, and the plan's calls of this read are what is sent next time.
Learning the calls from the plans' own runs keeps ``collectors.dcmi.plans`` the one place that
says what a reading needs. What cannot change while the driver runs (``plans.STATIC_CALLS``) is
read once per helper start.

A source whose plan needs a function the library lacks is remembered and handed to the tool at
once from then on (no call per reading to learn it again); a field the trust check moved back to
npu-smi (``agent.dcmi.trust``) takes its whole source back to the tool.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping
from typing import Any

from agent.core.backend import TOOL, Fallback
from agent.dcmi.client import Answer, DcmiClient
from collectors.base import ChipRef, Source
from collectors.dcmi import plans
from collectors.dcmi.errors import (
    DcmiBadRequest,
    DcmiCallHung,
    DcmiError,
    DcmiInvalid,
    DcmiUnsupported,
    DcmiWorkerError,
)
from collectors.dcmi.readings import ChipId

__all__ = ["DcmiBackend"]

log = logging.getLogger(__name__)

CallKey = tuple[str, tuple[tuple[str, Any], ...]]  # a call's name and its sorted arguments


class DcmiBackend:
    """Reads sources through DCMI; thread-safe (the client serialises the calls)."""

    name = "dcmi"

    def __init__(self, client: DcmiClient) -> None:
        self.client = client
        self._lock = threading.Lock()
        self._chips: tuple[ChipId, ...] = ()
        self._unsupported: dict[str, str] = {}  # source -> why DCMI cannot serve it
        self._on_tool: dict[str, str] = {}  # source -> why the trust check gave it back to the tool
        self.last_run: dict[str, dict[str, int]] = {}  # source -> readings served per backend, last run
        self.fallbacks: dict[str, int] = {}  # source -> readings handed to the tool since start
        self._learned: dict[tuple[str, int | None], tuple[CallKey, ...]] = {}  # (source, chip) -> its calls
        self._static: dict[CallKey, Any] = {}  # plans.STATIC_CALLS' answers from the running helper
        self._static_generation = -1  # the helper (client.starts) they came from

    # --- RecordReader
    def serves(self, source: Source) -> bool:
        return source.name in plans.SERVED

    def active(self) -> bool:
        return self.client.starts > 0 and self.client.failures == 0

    def read(self, source: Source, chip: ChipRef | None) -> Any:
        with self._lock:
            why = self._unsupported.get(source.name) or self._on_tool.get(source.name)
        if why is not None:
            raise Fallback("exit", why)
        try:
            return self._read(source.name, chip)
        except plans.NeedsIds as exc:
            raise Fallback("exit", str(exc)) from exc
        except DcmiCallHung as exc:  # this reading's call hangs; the helper serves the rest
            raise Fallback("timeout", f"DCMI: {exc}") from exc
        except DcmiWorkerError as exc:
            reason = "timeout" if exc.reason == "timeout" else "exit"
            raise Fallback(reason, f"DCMI helper {exc.reason}: {exc}", helper=True) from exc
        except DcmiUnsupported as exc:
            with self._lock:
                self._unsupported[source.name] = str(exc)
            log.info("%s: %s; npu-smi serves it", source.name, exc)
            raise Fallback("exit", str(exc)) from exc
        except DcmiError as exc:
            raise Fallback("exit", f"DCMI: {exc}") from exc
        except (DcmiInvalid, ValueError) as exc:  # ValueError: an answer of another shape (from_json)
            raise Fallback("parse", f"DCMI: {exc}") from exc
        except DcmiBadRequest as exc:
            raise Fallback("exit", f"DCMI refused the request: {exc}") from exc

    def ran(self, source: str, counts: Mapping[str, int]) -> None:
        with self._lock:
            self.last_run[source] = {self.name: counts.get(self.name, 0), TOOL: counts.get(TOOL, 0)}
            self.fallbacks[source] = self.fallbacks.get(source, 0) + counts.get(TOOL, 0)

    # --- the trust check's say
    def give_back(self, source: str, why: str) -> None:
        """The tool serves ``source`` from now on (a field of it disagreed with npu-smi)."""
        with self._lock:
            self._on_tool[source] = why

    def on_tool(self) -> dict[str, str]:
        with self._lock:
            return {**self._unsupported, **self._on_tool}

    # --- reading
    def call(self, name: str, **args: Any) -> Any:
        return self.client.call(name, **args)

    def chips(self, refresh: bool = False) -> tuple[ChipId, ...]:
        with self._lock:
            known = self._chips
        if known and not refresh:
            return known
        listed = plans.chip_ids(self.call("chips"))
        with self._lock:
            self._chips = listed
        return listed

    def known_chips(self) -> tuple[ChipId, ...]:
        """The library's chip list as last read (no call: safe on any thread, e.g. a fault event's)."""
        with self._lock:
            return self._chips

    def logic_id(self, chip: ChipRef) -> int:
        """The logical id of ``chip``: the library's own list first, then what ``npu-smi info -m`` said."""
        for refresh in (False, True):
            for known in self.chips(refresh):
                if (known.card_id, known.device_id) == (chip.npu, chip.chip):
                    return known.logic_id
            if chip.logic_id is not None:
                return chip.logic_id
        raise Fallback("exit", f"DCMI lists no chip npu {chip.npu} chip {chip.chip}")

    def read_plan(self, source: str, chip: ChipRef) -> Any:
        """The source's records for ``chip`` through DCMI even when the tool serves it now (the trust check);
        the chip's row of the table for ``npu_smi_info``. Raises ``Fallback``."""
        try:
            return self._read(source, chip)
        except (plans.NeedsIds, DcmiWorkerError, DcmiCallHung, DcmiUnsupported, DcmiError, DcmiInvalid, ValueError,
                DcmiBadRequest) as exc:
            raise Fallback("exit", str(exc)) from exc

    def _read(self, source: str, chip: ChipRef | None) -> Any:
        if source in plans.NODE_PLANS:
            chips = self.chips(refresh=True)
            return self._batched((source, None), lambda call: plans.NODE_PLANS[source](call, chips))
        if chip is None:
            raise DcmiBadRequest(f"{source} is a per-chip source")
        logic = self.logic_id(chip)
        return self._batched((source, logic), lambda call: plans.CHIP_PLANS[source](call, logic))

    def _static_value(self, call_key: CallKey) -> Any:
        with self._lock:
            if self._static_generation != self.client.starts:  # a new helper: read them again
                self._static.clear()
                self._static_generation = self.client.starts
            return self._static.get(call_key)

    def _keep_static(self, call_key: CallKey, value: Any) -> None:
        with self._lock:
            if self._static_generation == self.client.starts:
                self._static[call_key] = value

    def _batched(self, key: tuple[str, int | None], plan: Callable[[plans.Call], Any]) -> Any:
        """``plan`` over the answers of one batch of the calls it made last time (see the module's doc)."""
        with self._lock:
            known = self._learned.get(key, ())
        answers: dict[CallKey, Answer] = {}
        if known:
            answers = dict(zip(known, self.client.call_batch([(name, dict(args)) for name, args in known])))
        made: list[CallKey] = []

        def call(name: str, **args: Any) -> Any:
            call_key = (name, tuple(sorted(args.items())))
            static = name in plans.STATIC_CALLS
            if static and (kept := self._static_value(call_key)) is not None:
                return kept
            made.append(call_key)
            answer = answers.get(call_key)
            value = answer.get() if answer is not None else self.client.call(name, **args)
            if static and value is not None:
                self._keep_static(call_key, value)
            return value

        try:
            result = plan(call)
        except BaseException:
            # cut short: keep what it would have called beyond the point it reached
            made.extend(key for key in known if key not in made)
            raise
        finally:
            with self._lock:
                self._learned[key] = tuple(k for k in dict.fromkeys(made) if k not in self._static)
        return result
