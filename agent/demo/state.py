"""The demo node's state: one small JSON file that the fake tools read on every call.

Writers (``DemoNode`` in the test or demo process) replace the file atomically (temp file +
``os.replace``), so a fake never sees a half-written state and faults can be switched while the
agent is running. Standard library only: the fakes import this module on every invocation.
"""

from __future__ import annotations

import json
import os
import time

TYPE_CHECKING = False  # not typing.TYPE_CHECKING: importing typing costs the fakes ~10 ms per call
if TYPE_CHECKING:
    from typing import Any

__all__ = [
    "DEMO_DIR_ENV",
    "DEMO_TIME_ENV",
    "STATE_FILE",
    "DemoDirUnusable",
    "DemoState",
    "demo_now",
    "load_state",
    "save_state",
]

DEMO_DIR_ENV = "NPUWATCH_DEMO_DIR"
DEMO_TIME_ENV = "NPUWATCH_DEMO_TIME"  # freezes the fakes' clock (seconds since the epoch)
STATE_FILE = "state.json"


class DemoDirUnusable(Exception):
    """The demo directory cannot be used: not writable, another user's, or another install's running demo.
    The message is one line that says which, and what to do."""


class DemoState:
    """Everything the fakes need: the node's shape, its timing knobs, the active faults and history.

    ``node_faults`` maps a node fault name to its parameters; ``chip_faults`` maps a chip id
    (as a string: JSON keys) to ``{fault name: parameters}``. Every parameter dict carries
    ``since`` (demo-clock seconds when the fault was switched on). ``carried`` keeps, per chip,
    what faults that have ended left behind on the hardware counters (``counters``: error
    totals; ``link_records``: ``[time, "LINK UP"|"LINK DOWN"]`` oldest first; ``link_ups``), so
    clearing a fault stops new errors without erasing old ones (agent.demo.carry). A plain class
    rather than a dataclass because ``dataclasses`` alone adds ~10 ms to every fake call.
    """

    __slots__ = (
        "carried",
        "chip_faults",
        "chips",
        "created_at",
        "delay_s",
        "model",
        "node_faults",
        "seed",
        "subnet",
        "time_override",
    )

    def __init__(  # noqa: PLR0917  (mirrors the JSON keys; callers use keywords)
        self,
        chips: int = 8,
        model: str = "910B3",
        seed: int = 0,
        delay_s: float = 0.0,
        created_at: float = 0.0,
        time_override: float | None = None,
        node_faults: dict[str, dict[str, Any]] | None = None,
        chip_faults: dict[str, dict[str, dict[str, Any]]] | None = None,
        carried: dict[str, dict[str, Any]] | None = None,
        subnet: int | None = None,
    ) -> None:
        self.chips = chips
        self.model = model
        self.seed = seed
        self.delay_s = delay_s
        self.created_at = created_at
        self.time_override = time_override
        self.subnet = subnet  # second octet of the RoCE device IPs; None: from the seed
        self.node_faults: dict[str, dict[str, Any]] = node_faults if node_faults is not None else {}
        self.chip_faults: dict[str, dict[str, dict[str, Any]]] = {} if chip_faults is None else chip_faults
        self.carried: dict[str, dict[str, Any]] = {} if carried is None else carried

    def __repr__(self) -> str:
        return f"DemoState({self.to_dict()!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, DemoState) and self.to_dict() == other.to_dict()

    __hash__ = None  # type: ignore[assignment]  # mutable

    def chip_fault(self, chip: int, name: str) -> dict[str, Any] | None:
        """The parameters of fault ``name`` on ``chip``, or None when it is off."""
        return self.chip_faults.get(str(chip), {}).get(name)

    def carried_for(self, chip: int) -> dict[str, Any]:
        """What ended faults left on ``chip``'s counters (empty when nothing has ended yet)."""
        return self.carried.get(str(chip), {})

    def node_fault(self, name: str) -> dict[str, Any] | None:
        return self.node_faults.get(name)

    def visible_chips(self) -> list[int]:
        """NPU ids the tools still report (a vanished chip is missing from every output)."""
        return [c for c in range(self.chips) if self.chip_fault(c, "vanish") is None]

    @property
    def faults(self) -> dict[str, Any]:
        """Every active fault: ``{"node": {name: params}, "chips": {"3": {name: params}}}``."""
        return {"node": self.node_faults, "chips": self.chip_faults}

    def to_dict(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in self.__slots__}

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=1, sort_keys=True)

    @classmethod
    def from_dict(cls, raw: dict[str, Any]) -> DemoState:
        return cls(**{k: raw[k] for k in cls.__slots__ if k in raw})


def load_state(directory: str | os.PathLike[str]) -> DemoState:
    """Read the state file of a demo directory (raises OSError / ValueError when unusable)."""
    with open(os.path.join(directory, STATE_FILE), encoding="utf-8") as handle:
        return DemoState.from_dict(json.load(handle))


def save_state(directory: str | os.PathLike[str], state: DemoState) -> None:
    """Replace the state file atomically: readers see the old or the new state, never a mix."""
    import tempfile

    os.makedirs(directory, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".state-", suffix=".json", dir=directory)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(state.to_json())
        os.replace(tmp, os.path.join(directory, STATE_FILE))
    except BaseException:
        os.unlink(tmp)
        raise


def demo_now(state: DemoState | None = None) -> float:
    """The fakes' clock: NPUWATCH_DEMO_TIME, else the state's time_override, else time.time()."""
    frozen = os.environ.get(DEMO_TIME_ENV)
    if frozen:
        return float(frozen)
    if state is not None and state.time_override is not None:
        return float(state.time_override)
    return time.time()

