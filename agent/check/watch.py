"""Watch the chips while the sustained GEMM runs: clock, power and temperature from ``npu-smi info -t common``."""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field

from agent.health.node import chip_parse
from agent.health.reader import NodeReader
from agent.health.readings import Reading
from collectors import npu_smi_common
from collectors.base import ChipRef

__all__ = ["ChipWatch", "Watcher"]

BUSY_RATIO = 0.5  # a clock below its rating only counts while the chip is this busy (idle chips clock down)


def _larger(current: float | None, seen: float | None) -> float | None:
    if seen is None:
        return current
    return seen if current is None else max(current, seen)


@dataclass
class ChipWatch:
    """What the samples of one chip showed (None: never read)."""

    samples: int = 0
    errors: int = 0
    max_temperature: float | None = None
    max_power: float | None = None
    min_busy_clock: float | None = None  # lowest AI Core clock while AI Core usage >= BUSY_RATIO
    rated_clock: float | None = None

    def add(self, record: npu_smi_common.CommonRecord) -> None:
        self.samples += 1
        self.max_temperature = _larger(self.max_temperature, record.temperature_celsius)
        self.max_power = _larger(self.max_power, record.power_watts)
        if record.aicore_max_frequency_hertz:
            self.rated_clock = record.aicore_max_frequency_hertz
        busy = record.aicore_usage_ratio is not None and record.aicore_usage_ratio >= BUSY_RATIO
        if busy and record.aicore_frequency_hertz is not None:
            clock = record.aicore_frequency_hertz
            self.min_busy_clock = clock if self.min_busy_clock is None else min(self.min_busy_clock, clock)


@dataclass
class Watcher:
    """Samples every chip every ``interval_s`` in a thread until ``stop``; at least once."""

    tools: NodeReader
    chips: list[ChipRef]
    interval_s: float
    watched: dict[ChipRef, ChipWatch] = field(default_factory=dict)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def start(self) -> Watcher:
        self.watched = {ref: ChipWatch() for ref in self.chips}
        self._thread = threading.Thread(target=self._loop, name="check-watch", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> dict[ChipRef, ChipWatch]:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        return self.watched

    def _loop(self) -> None:
        with ThreadPoolExecutor(max_workers=max(1, self.tools.parallelism), thread_name_prefix="check-watch") as pool:
            while True:
                self._sample(pool.submit)
                if self._stop.wait(self.interval_s):
                    break

    def _sample(self, submit: Callable[..., Future[Reading]]) -> None:
        futures = {ref: submit(self.tools.read, npu_smi_common.SOURCE, ref, chip_parse(npu_smi_common.parse, ref.chip))
                   for ref in self.chips}
        for ref, future in futures.items():
            reading = future.result()
            if reading.ok:
                self.watched[ref].add(reading.value)
            else:
                self.watched[ref].errors += 1
