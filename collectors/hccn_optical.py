"""Optical module readings: ``hccn_tool -i <devid> -optical -g``.

Sample output (QSFP, 4 lanes; abridged)::

    optical info:
    present              : not present
    temperature          : 47 C
    vendor name          : Hisense
    Vcc                  : 3262.90 mV
    Tx Power0            : 4.4035 mW
    Rx Power0            : 1.0189 mW
    TxPower High Thres   : 3.5481 mW
    Tx Bias0             : 7.9360 mA
    Rx Los Flag          : 0xff
    Media SNR Lane0      : 23.1211 dB

``present : not present`` has been captured next to valid readings, so it is
kept but never trusted. Powers are converted to watts (``mW``, ``uW``, ``W``
and ``dBm`` accepted); values such as ``not supported`` or ``NA`` are absent.
Exported: ``npu_optical_temperature_celsius{npu}``,
``npu_optical_tx_power_watts{npu,lane}``, ``npu_optical_rx_power_watts{npu,lane}``
and ``npu_optical_signal_lost{npu}`` (1 when any Tx/Rx LOS or LoL flag is non-zero,
only when the module prints flags).

Readings outside their physical range (``collectors.bounds``: temperature, lane
powers, Vcc, bias, SNR) and lanes numbered beyond ``LIMITS["lanes"]`` (each lane
is a series) are dropped and listed in ``OpticalRecord.rejected`` with their
line; the module's other readings stay.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, fields

from collectors._text import split_key_value
from collectors.base import ChipRef, CollectContext, Sample, label_pairs
from collectors.bounds import LIMITS, Rejection, Rejects
from collectors.hccn_link import clean_lines, hccn_source, raise_unparsable

__all__ = ["SOURCE", "OpticalRecord", "parse", "power_watts", "samples"]

_QUANTITY_RE = re.compile(r"^(?P<num>[-+]?(?:\d+(?:\.\d*)?|\.\d+))\s*(?P<unit>[A-Za-z]+)?$")
_LANE_POWER_RE = re.compile(r"^(?P<dir>tx|rx)\s*power\s*(?P<lane>\d*)$")
_BIAS_RE = re.compile(r"^tx\s*bias\s*(?P<lane>\d*)$")
_SNR_RE = re.compile(r"^(?P<side>host|media)\s+snr\s+lane\s*(?P<lane>\d+)$")
_THRESHOLD_RE = re.compile(r"^(?P<what>.+?)\s+(?P<edge>high|low)\s+thres(?:hold)?$")
_FLAG_RE = re.compile(r"^(?:tx|rx)\s+(?:los|lol)\s+flag$")
_VENDOR_KEYS = frozenset({
    "vendor name", "vendor part number", "vendor serial number", "vendor org unique id", "xsfp identifier",
    "xsfp wave length", "manufact date code", "high power enable reg",
})
_POWER_SCALE = {"w": 1.0, "mw": 1e-3, "uw": 1e-6}
_SCALE = {"c": 1.0, "v": 1.0, "mv": 1e-3, "a": 1.0, "ma": 1e-3, "ua": 1e-6, "db": 1.0}
_UNIT_SUFFIX = {"c": "celsius", "v": "volts", "mv": "volts", "a": "amps", "ma": "amps", "ua": "amps",
                "w": "watts", "mw": "watts", "uw": "watts", "dbm": "watts", "db": "db"}


@dataclass(frozen=True)
class OpticalRecord:
    present: str | None = None  # printed but unreliable; never used for metrics
    temperature_celsius: float | None = None
    vcc_volts: float | None = None
    tx_power_watts: dict[str, float] = field(default_factory=dict)  # lane -> W
    rx_power_watts: dict[str, float] = field(default_factory=dict)
    tx_bias_amps: dict[str, float] = field(default_factory=dict)
    snr_db: dict[str, float] = field(default_factory=dict)  # "media0", "host1", ...
    thresholds: dict[str, float] = field(default_factory=dict)  # "vcc_high_volts", "txpower_low_watts", ...
    flags: dict[str, int] = field(default_factory=dict)  # "rx_los_flag" -> 0xff
    vendor: dict[str, str] = field(default_factory=dict)  # "vendor_name" -> "Hisense"
    other: dict[str, str] = field(default_factory=dict)  # anything not understood, verbatim
    rejected: tuple[Rejection, ...] = ()  # lines and values refused (collectors.bounds)

    @property
    def signal_lost(self) -> bool | None:
        """True when any LOS/LoL flag is set; None when the module printed no flags."""
        if not self.flags:
            return None
        return any(value != 0 for value in self.flags.values())


def _quantity(value: str) -> tuple[float, str] | None:
    match = _QUANTITY_RE.match(value.replace(",", "").strip())
    if match is None:
        return None
    return float(match.group("num")), (match.group("unit") or "").lower()


def power_watts(value: str) -> float | None:
    """``4.4035 mW`` / ``-2.5 dBm`` / ``0.0012 W`` in watts; None when absent or not a power."""
    quantity = _quantity(value)
    if quantity is None:
        return None
    number, unit = quantity
    if unit == "dbm":
        try:
            return 10 ** (number / 10) / 1000
        except OverflowError:
            return None
    scale = _POWER_SCALE.get(unit)
    return None if scale is None else number * scale


def _scaled(value: str) -> tuple[float, str] | None:
    """A non-power quantity in its base unit, with the unit's metric-name suffix."""
    quantity = _quantity(value)
    if quantity is None:
        return None
    number, unit = quantity
    if unit in _POWER_SCALE or unit == "dbm":
        watts = power_watts(value)
        return None if watts is None else (watts, "watts")
    scale = _SCALE.get(unit)
    if scale is None:
        return None
    return number * scale, _UNIT_SUFFIX[unit]


def _flag(value: str) -> int | None:
    text = value.strip().lower()
    try:
        return int(text, 16) if text.startswith("0x") else int(text, 10)
    except ValueError:
        return None


def parse(text: str) -> OpticalRecord:
    draft = _Draft()
    header = False
    for line_no, line in clean_lines(text, draft.rejects):
        pair = split_key_value(line)
        if pair is None:
            continue
        raw_key, value = pair
        key = " ".join(raw_key.lower().split())
        draft.line_no, draft.line = line_no, line
        if key == "optical info":
            header = True
        elif key:
            _store(draft, key, value)
    # An error message with a colon lands in `other`; it alone is not a reading.
    if not header and not any(getattr(draft, name) not in (None, {}) for name in _FIELDS if name != "other"):
        raise_unparsable(text, "optical module readings")
    return OpticalRecord(**{name: getattr(draft, name) for name in _FIELDS}, rejected=draft.rejects.freeze())


@dataclass
class _Draft:
    """Mutable twin of ``OpticalRecord`` filled line by line."""

    present: str | None = None
    temperature_celsius: float | None = None
    vcc_volts: float | None = None
    tx_power_watts: dict[str, float] = field(default_factory=dict)
    rx_power_watts: dict[str, float] = field(default_factory=dict)
    tx_bias_amps: dict[str, float] = field(default_factory=dict)
    snr_db: dict[str, float] = field(default_factory=dict)
    thresholds: dict[str, float] = field(default_factory=dict)
    flags: dict[str, int] = field(default_factory=dict)
    vendor: dict[str, str] = field(default_factory=dict)
    other: dict[str, str] = field(default_factory=dict)
    rejects: Rejects = field(default_factory=Rejects)
    line_no: int = 0  # the line being stored, for rejections
    line: str = ""

    def checked(self, bound: str, value: float, what: str) -> float | None:
        return self.rejects.value(bound, value, self.line_no, self.line, what)

    def lane(self, digits: str) -> str | None:
        """The lane label ("" prints as lane 0), or None (and a rejection) beyond the lane cap."""
        if len(digits) > 2 or int(digits or "0") >= LIMITS["lanes"]:
            self.rejects.add(f"lane {digits} beyond {LIMITS['lanes']} lanes", self.line_no, self.line)
            return None
        return digits or "0"


_FIELDS = tuple(f.name for f in fields(OpticalRecord) if f.name != "rejected")


def _store(record: _Draft, key: str, value: str) -> None:
    if key == "present":
        record.present = value
    elif key == "temperature":
        scaled = _scaled(value)
        if scaled is not None and scaled[1] == "celsius":
            record.temperature_celsius = record.checked("temperature_celsius", scaled[0], "temperature")
    elif key == "vcc":
        scaled = _scaled(value)
        if scaled is not None and scaled[1] == "volts":
            record.vcc_volts = record.checked("optical_voltage_volts", scaled[0], "Vcc")
    elif (match := _LANE_POWER_RE.match(key)) is not None:
        _store_lane_power(record, match, value)
    elif (match := _BIAS_RE.match(key)) is not None:
        scaled = _scaled(value)
        lane = record.lane(match.group("lane"))
        amps = None if scaled is None or scaled[1] != "amps" else record.checked("optical_bias_amps", scaled[0], key)
        if lane is not None and amps is not None:
            record.tx_bias_amps[lane] = amps
    elif (match := _SNR_RE.match(key)) is not None:
        scaled = _scaled(value)
        lane = record.lane(match.group("lane"))
        db = None if scaled is None or scaled[1] != "db" else record.checked("snr_db", scaled[0], key)
        if lane is not None and db is not None:
            record.snr_db[f"{match.group('side')}{lane}"] = db
    elif (match := _THRESHOLD_RE.match(key)) is not None:
        scaled = _scaled(value)
        if scaled is not None:
            name = "_".join(match.group("what").split())
            record.thresholds[f"{name}_{match.group('edge')}_{scaled[1]}"] = scaled[0]
    elif _FLAG_RE.match(key):
        flag = _flag(value)
        if flag is not None:
            record.flags["_".join(key.split())] = flag
    elif key in _VENDOR_KEYS:
        record.vendor["_".join(key.split())] = value
    else:
        record.other[key] = value


def _store_lane_power(record: _Draft, match: re.Match[str], value: str) -> None:
    watts = power_watts(value)
    if watts is None:
        return
    lane = record.lane(match.group("lane"))
    checked = record.checked("optical_power_watts", watts, f"{match.group('dir')} power")
    if lane is not None and checked is not None:
        target = record.tx_power_watts if match.group("dir") == "tx" else record.rx_power_watts
        target[lane] = checked


def samples(record: OpticalRecord, chip: ChipRef, ctx: CollectContext) -> list[Sample]:
    npu, die = chip.npu, chip.chip
    out: list[Sample] = []
    if record.temperature_celsius is not None:
        out.append(
            Sample("npu_optical_temperature_celsius", label_pairs(npu=npu, chip=die), record.temperature_celsius))
    for lane, watts in sorted(record.tx_power_watts.items()):
        out.append(Sample("npu_optical_tx_power_watts", label_pairs(npu=npu, chip=die, lane=lane), watts))
    for lane, watts in sorted(record.rx_power_watts.items()):
        out.append(Sample("npu_optical_rx_power_watts", label_pairs(npu=npu, chip=die, lane=lane), watts))
    lost = record.signal_lost
    if lost is not None:
        out.append(Sample("npu_optical_signal_lost", label_pairs(npu=npu, chip=die), 1.0 if lost else 0.0))
    return out


SOURCE = hccn_source("hccn_optical", "optical", parse, samples)
