"""Simulated readings of the demo node: deterministic functions of (seed, chip, time, faults).

Gauges move smoothly (slow sines with a per-chip phase); counters grow linearly with time so
they never go backwards. Nothing here prints; the fake tools format these numbers.
"""

from __future__ import annotations

import math

from agent.demo.state import DemoState

TYPE_CHECKING = False  # see state.py: the fakes avoid importing typing
if TYPE_CHECKING:
    from typing import Any

__all__ = [
    "HBM_TOTAL_MB",
    "HCCS_LINKS",
    "LINK_DOWN",
    "LINK_UP",
    "MAX_LINK_RECORDS",
    "ChipReading",
    "FlapState",
    "active_count",
    "bus_id",
    "chip_reading",
    "cpu_affinity",
    "device_ip",
    "ecc_counts",
    "episode_counts",
    "flap_state",
    "hccs_packets",
    "link_episode",
    "link_is_up",
    "optical_reading",
    "optics_dark",
    "roce_counters",
    "total_count",
    "uptime_start",
]

HBM_TOTAL_MB = 65536
HCCS_LINKS = 7  # 8-chip full mesh: one HCCS port per peer
_BASE_HBM_MB = 2654  # what an idle 910B reports (driver/firmware reservation)
_BUS_PREFIXES = ("C1", "C2", "81", "82", "01", "02", "41", "42")
_AFFINITY = ("144-167", "0-23", "144-167", "0-23", "96-119", "48-71", "96-119", "48-71")


_MASK = (1 << 64) - 1


class _Rng:
    """splitmix64: a tiny deterministic generator (importing ``random`` costs each fake call ~5 ms)."""

    __slots__ = ("_x",)

    def __init__(self, seed: int) -> None:
        self._x = seed & _MASK

    def _next(self) -> int:
        self._x = (self._x + 0x9E3779B97F4A7C15) & _MASK
        z = self._x
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _MASK
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _MASK
        return z ^ (z >> 31)

    def uniform(self, low: float, high: float) -> float:
        return low + (high - low) * (self._next() / 2.0**64)

    def randint(self, low: int, high: int) -> int:
        return low + self._next() % (high - low + 1)


def _rng(state: DemoState, chip: int, salt: int = 0) -> _Rng:
    return _Rng(state.seed * 100_003 + chip * 101 + salt)


def _wave(now: float, period_s: float, phase: float) -> float:
    """A sine in 0..1."""
    return 0.5 + 0.5 * math.sin(2 * math.pi * now / period_s + phase)


_COUNTER_EPOCH = 1_500_000_000.0  # counters count from here, so any frozen test clock sees them grow


def uptime_start(state: DemoState, now: float) -> float:
    """When the simulated devices came up: a day before the demo node was created (or before ``now``)."""
    return min(state.created_at, now) - 86_400.0


def _counter_seconds(now: float) -> float:
    return max(0.0, now - _COUNTER_EPOCH)


def bus_id(npu: int) -> str:
    """PCIe address in the order an Atlas 800 A2 board enumerates its 8 NPUs."""
    prefix = _BUS_PREFIXES[npu % 8]
    if npu >= 8:  # a 16-chip benchmark node: a second, made-up bank
        prefix = f"{int(prefix, 16) + 0x10 * (npu // 8):02X}"
    return f"0000:{prefix}:00.0"


def device_ip(state: DemoState, npu: int) -> str:
    """The RoCE port's IP (``hccn_tool -ip``), as the plogs name it: 29.<subnet>.<npu>.<10 + npu>, the
    subnet set for the node (a demo fleet gives each node its own) or derived from its seed."""
    subnet = state.subnet if state.subnet is not None else (state.seed % 200) + 1
    return f"29.{subnet}.{npu}.{10 + npu}"


def cpu_affinity(npu: int) -> str:
    return _AFFINITY[npu % 8]


class ChipReading:
    """One chip's gauges at one instant (plain class: ``dataclasses`` is slow to import)."""

    __slots__ = (
        "aicore_freq_mhz",
        "aicore_pct",
        "aicpu_pct",
        "aivector_pct",
        "ctrlcpu_pct",
        "hbm_bw_pct",
        "hbm_temp_c",
        "hbm_used_mb",
        "power_w",
        "temp_c",
    )

    def __init__(
        self,
        *,
        aicore_pct: int,
        aivector_pct: int,
        aicpu_pct: int,
        ctrlcpu_pct: int,
        hbm_bw_pct: int,
        power_w: float,
        temp_c: int,
        hbm_temp_c: int,
        hbm_used_mb: int,
        aicore_freq_mhz: int,
    ) -> None:
        self.aicore_pct = aicore_pct
        self.aivector_pct = aivector_pct
        self.aicpu_pct = aicpu_pct
        self.ctrlcpu_pct = ctrlcpu_pct
        self.hbm_bw_pct = hbm_bw_pct
        self.power_w = power_w
        self.temp_c = temp_c
        self.hbm_temp_c = hbm_temp_c
        self.hbm_used_mb = hbm_used_mb
        self.aicore_freq_mhz = aicore_freq_mhz


def chip_reading(state: DemoState, chip: int, now: float) -> ChipReading:
    """Utilisation, power, temperature and HBM of one chip at ``now``."""
    rng = _rng(state, chip)
    phase, phase2, phase3 = (rng.uniform(0, 2 * math.pi) for _ in range(3))
    util = 100 * (0.15 + 0.7 * _wave(now, 120.0, phase) + 0.15 * _wave(now, 17.0, phase2))
    process = state.chip_fault(chip, "process")
    if process is not None:
        util = max(util, 80.0)
    aicore = int(max(0.0, min(100.0, util)))
    power = 75.0 + 2.6 * aicore + 6.0 * _wave(now, 7.0, phase3)
    temp = 38 + int(0.3 * aicore) + rng.randint(0, 4)
    hbm = _BASE_HBM_MB + int(38_000 * _wave(now, 300.0, phase))
    if process is not None:
        hbm += int(process.get("memory_mb", 20480))
    temp_c, hbm_temp_c = min(75, temp), min(80, temp + 3)
    hot = state.chip_fault(chip, "hot")
    if hot is not None:  # a failing fan or heat sink: the chip sits at the set point, +0..1 degree
        temp_c = int(float(hot.get("celsius", 97.0)) + _wave(now, 40.0, phase2))
        hbm_temp_c = temp_c + 3
    return ChipReading(
        aicore_pct=aicore,
        aivector_pct=int(aicore * 0.6),
        aicpu_pct=int(2 + 3 * _wave(now, 11.0, phase2)),
        ctrlcpu_pct=int(3 + 6 * _wave(now, 23.0, phase3)),
        hbm_bw_pct=int(aicore * 0.7),
        power_w=round(min(350.0, power), 1),
        temp_c=temp_c,
        hbm_temp_c=hbm_temp_c,
        hbm_used_mb=min(HBM_TOTAL_MB, hbm),
        aicore_freq_mhz=1800 if aicore > 5 else 800,
    )


def episode_counts(name: str, params: dict[str, Any], now: float) -> dict[str, float]:
    """What one fault episode (switched on at ``params["since"]``) has added to the chip's counters by ``now``.

    Keys: ``hbm_sbe``, ``hbm_dbe`` (ECC errors), ``hccs_errors`` (link 0), ``roce_errors`` and
    ``roce_retries`` (the ``-stat`` error and retransmission counters derive from these two).
    """
    spent = max(0.0, now - float(params["since"]))
    if name == "hbm_sbe_rate":
        return {"hbm_sbe": int(spent * float(params.get("per_s", 0.5)))}
    if name == "hbm_sbe_rising":
        return {"hbm_sbe": int(_ramp_integral(spent, float(params.get("ramp_s", 7200.0)),
                                              float(params.get("per_h", 30.0)) / 3600.0))}
    if name == "optics_degrading":
        duration = _degrade_s(params)
        errors, retries = _ROCE_RATES["optics_no_light"]
        # the error rate grows with the square of the progress towards loss of signal, reaching the
        # no-light rate then: integral of rate * (t / duration)^2 is rate * duration * progress^3 / 3
        progress = min(1.0, spent / duration)
        fading = duration * progress**3 / 3
        dark = max(0.0, spent - duration)
        return {"roce_errors": errors * (fading + dark), "roce_retries": retries * (fading + dark)}
    if name == "hbm_dbe":
        interval = max(0.001, float(params.get("interval_s", 30.0)))
        return {"hbm_dbe": 1 + int(spent / interval)}
    if name == "hccs_error":
        return {"hccs_errors": 1 + int(spent * float(params.get("per_s", 2.0)))}
    rates = _ROCE_RATES.get(name)
    if rates is not None:
        return {"roce_errors": spent * rates[0], "roce_retries": spent * rates[1]}
    return {}


_ROCE_RATES = {"optics_no_light": (40.0, 25.0), "link_flap": (6.0, 15.0)}  # errors/s, retries/s


def _ramp_integral(spent: float, ramp_s: float, peak_per_s: float) -> float:
    """Events by ``spent`` seconds at a rate rising linearly from 0 to ``peak_per_s`` over ``ramp_s``, then flat."""
    ramp = max(0.001, ramp_s)
    if spent <= ramp:
        return peak_per_s * spent * spent / (2 * ramp)
    return peak_per_s * (ramp / 2 + spent - ramp)


def _degrade_s(params: dict[str, Any]) -> float:
    return max(1.0, float(params.get("duration_s", 3600.0)))


def optics_dark(state: DemoState, chip: int, now: float) -> bool:
    """True when the module receives no usable light: ``optics_no_light``, or ``optics_degrading`` run its course."""
    if state.chip_fault(chip, "optics_no_light") is not None:
        return True
    fading = state.chip_fault(chip, "optics_degrading")
    return fading is not None and now >= float(fading["since"]) + _degrade_s(fading)


def active_count(state: DemoState, chip: int, key: str, now: float) -> float:
    """The part of counter ``key`` that the faults still on have added."""
    faults = state.chip_faults.get(str(chip), {})
    return sum(episode_counts(name, params, now).get(key, 0.0) for name, params in faults.items())


def total_count(state: DemoState, chip: int, key: str, now: float) -> float:
    """Counter ``key`` over the chip's life: ended faults (carried) plus the faults still on."""
    carried = float(state.carried_for(chip).get("counters", {}).get(key, 0.0))
    return carried + active_count(state, chip, key, now)


def ecc_counts(state: DemoState, chip: int, now: float) -> tuple[int, int, int, int]:
    """HBM ECC (single, double) errors of the faults still on, then (single, double) aggregate totals.

    The current counts drop to 0 when a fault is cleared (the demo's stand-in for a repaired
    chip); the aggregate totals never go down, as on real hardware.
    """
    return (
        int(active_count(state, chip, "hbm_sbe", now)),
        int(active_count(state, chip, "hbm_dbe", now)),
        int(total_count(state, chip, "hbm_sbe", now)),
        int(total_count(state, chip, "hbm_dbe", now)),
    )


def hccs_packets(state: DemoState, chip: int, link: int, now: float) -> tuple[int, int]:
    """(tx, rx) HCCS packet counters of one link; they only grow."""
    rng = _rng(state, chip, salt=1000 + link)
    elapsed = _counter_seconds(now)
    return int(elapsed * rng.uniform(8e3, 12e3)), int(elapsed * rng.uniform(8e3, 12e3))


class FlapState:
    """Link state, link-up transitions since the device came up, change records newest first."""

    __slots__ = ("records", "up", "up_count")

    def __init__(self, *, up: bool, up_count: int, records: list[tuple[float, str]]) -> None:
        self.up = up
        self.up_count = up_count
        self.records = records


MAX_LINK_RECORDS = 20  # the driver keeps a short history; older records fall off
LINK_UP = "LINK UP"
LINK_DOWN = "LINK DOWN"


def link_episode(name: str, params: dict[str, Any], now: float) -> tuple[list[tuple[float, str]], int, bool] | None:
    """(change records, link-ups, link up now) one fault episode causes by ``now``; None if it leaves the link alone."""
    since = float(params["since"])
    if name in ("link_down", "optics_no_light"):
        return [(since, LINK_DOWN)], 0, False
    if name == "optics_degrading":  # the link holds until the light is lost
        lost = since + _degrade_s(params)
        return ([(lost, LINK_DOWN)], 0, False) if now >= lost else ([], 0, True)
    if name != "link_flap":
        return None
    half = max(0.5, float(params.get("period_s", 6.0)) / 2)
    # transition k happens at since + k*half: even k goes DOWN, odd k comes back UP
    last = int(max(0.0, now - since) // half)
    first = max(0, last - MAX_LINK_RECORDS)  # older transitions fall off the record list anyway
    records = [(since + k * half, LINK_DOWN if k % 2 == 0 else LINK_UP) for k in range(first, last + 1)]
    return records, (last + 1) // 2, last % 2 == 1


def flap_state(state: DemoState, chip: int, now: float) -> FlapState:
    """Link state and its change history: the boot, faults that have ended (carried), faults still on."""
    carried = state.carried_for(chip)
    records: list[tuple[float, str]] = [(uptime_start(state, now) + 95.0, LINK_UP)]
    records += [(float(at), str(event)) for at, event in carried.get("link_records", [])]
    up, up_count = True, 1 + int(carried.get("link_ups", 0))
    for name, params in state.chip_faults.get(str(chip), {}).items():
        episode = link_episode(name, params, now)
        if episode is not None:
            records += episode[0]
            up_count += episode[1]
            up = up and episode[2]
    records.sort(key=lambda r: r[0], reverse=True)
    return FlapState(up=up, up_count=up_count, records=records[:MAX_LINK_RECORDS])


def link_is_up(state: DemoState, chip: int, now: float) -> bool:
    return flap_state(state, chip, now).up


def roce_counters(state: DemoState, chip: int, now: float) -> dict[str, int]:
    """The ``hccn_tool -stat -g`` counters, in the order the tool prints them."""
    rng = _rng(state, chip, salt=2000)
    elapsed = _counter_seconds(now)
    tx_pkts = int(elapsed * rng.uniform(2.0e5, 2.4e5))
    rx_pkts = int(elapsed * rng.uniform(2.0e5, 2.4e5))
    errors = total_count(state, chip, "roce_errors", now)
    retries = total_count(state, chip, "roce_retries", now)
    counters: dict[str, int] = {"mac_tx_mac_pause_num": 0, "mac_rx_mac_pause_num": 0}
    counters["mac_tx_pfc_pkt_num"] = int(elapsed * 0.02)
    counters.update({f"mac_tx_pfc_pri{p}_pkt_num": 0 for p in range(8)})
    counters["mac_tx_pfc_pri3_pkt_num"] = counters["mac_tx_pfc_pkt_num"]
    counters["mac_rx_pfc_pkt_num"] = int(elapsed * 0.03)
    counters.update({f"mac_rx_pfc_pri{p}_pkt_num": 0 for p in range(8)})
    counters["mac_rx_pfc_pri3_pkt_num"] = counters["mac_rx_pfc_pkt_num"]
    counters.update(
        {
            "mac_tx_total_pkt_num": tx_pkts + 1200,
            "mac_tx_total_oct_num": (tx_pkts + 1200) * 4158,
            "mac_tx_bad_pkt_num": 0,
            "mac_tx_bad_oct_num": 0,
            "mac_rx_total_pkt_num": rx_pkts + 1100,
            "mac_rx_total_oct_num": (rx_pkts + 1100) * 4158,
            "mac_rx_bad_pkt_num": int(errors * 0.5),
            "mac_rx_bad_oct_num": int(errors * 0.5) * 4158,
            "mac_rx_fcs_err_pkt_num": int(errors * 0.5),
            "roce_rx_rc_pkt_num": rx_pkts,
            "roce_rx_all_pkt_num": rx_pkts,
            "roce_rx_err_pkt_num": int(errors),
            "roce_tx_rc_pkt_num": tx_pkts,
            "roce_tx_all_pkt_num": tx_pkts,
            "roce_tx_err_pkt_num": int(errors * 0.25),
            "roce_cqe_num": tx_pkts // 64,
            "roce_rx_cnp_pkt_num": int(elapsed * 0.4),
            "roce_tx_cnp_pkt_num": int(elapsed * 0.3),
            "roce_unexpected_ack_num": int(retries * 0.2),
            "roce_out_of_order_num": int(retries * 0.1),
            "roce_verification_err_num": 0,
            "roce_qp_status_err_num": 0,
            "roce_new_pkt_rty_num": int(retries),
            "roce_ecn_db_num": 0,
            "nic_tx_all_pkg_num": 2210 + int(elapsed * 0.01),
            "nic_tx_all_oct_num": (2210 + int(elapsed * 0.01)) * 98,
            "nic_rx_all_pkg_num": 3120 + int(elapsed * 0.02),
            "nic_rx_all_oct_num": (3120 + int(elapsed * 0.02)) * 102,
        }
    )
    return counters


_LOS_MW = 0.01  # -20 dBm: where optics_degrading ends in loss of signal


def optical_reading(state: DemoState, chip: int, now: float) -> dict[str, float]:
    """Module temperature (C), Vcc (mV), per-lane tx/rx power (mW) and bias (mA).

    ``optics_degrading`` (a fibre end getting dirtier, a module ageing) attenuates every lane linearly
    in dB, from its healthy level at ``since`` to ``_LOS_MW`` after ``duration_s``; then it is dark.
    """
    rng = _rng(state, chip, salt=3000)
    dark = optics_dark(state, chip, now)
    fading = state.chip_fault(chip, "optics_degrading")
    progress = 0.0 if fading is None else min(1.0, max(0.0, now - float(fading["since"])) / _degrade_s(fading))
    values: dict[str, float] = {
        "temperature": 44 + rng.randint(0, 6) + round(2 * _wave(now, 600.0, rng.uniform(0, 6))),
        "vcc": 3262.9 + rng.uniform(-20, 20),
    }
    for lane in range(4):
        values[f"tx{lane}"] = rng.uniform(1.20, 1.55)
        if dark:
            values[f"rx{lane}"] = rng.uniform(0.0, 0.0003)
        else:  # healthy * (LOS / healthy) ** progress: a straight line in dBm from healthy to the LOS level
            healthy = rng.uniform(0.85, 1.10)
            values[f"rx{lane}"] = healthy * (_LOS_MW / healthy) ** progress
        values[f"bias{lane}"] = rng.uniform(7.85, 7.95)
    return values
