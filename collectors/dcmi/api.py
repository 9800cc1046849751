"""``Dcmi``: the ctypes wrapper over ``libdcmi.so``, used inside the worker process only.

How it calls the library, and why:

- Every function is looked up when first used, never at load: a driver that lacks one function
  (older drivers have no ``dcmiv2_*``, newer ones may drop v1 names) loses that reading only, with
  ``DcmiUnsupported`` naming what is missing. Each symbol gets its argument types before its first
  call, so ctypes converts and checks every argument.
- A reading uses the ``dcmiv2_*`` function (one logical id) where the library has it, else the v1
  card/device function; the card/device pair of a logical id comes from the chip list or from
  ``dcmi_get_card_id_device_id_from_logicid``. ``init`` initialises each API the library has; an
  API whose init fails is treated as absent.
- A nonzero return is a ``DcmiError``; a count beyond the buffer passed, or negative, is
  ``DcmiInvalid``. Buffers are sized generously (``MAX_*``) because some functions take no length.

Values are returned as ``readings`` in the library's own units. The worker runs on Python 3.8:
nothing here may need a newer interpreter.
"""

from __future__ import annotations

import ctypes
from typing import Any, Callable

from collectors.dcmi.errors import DcmiError, DcmiInvalid, DcmiUnsupported, check
from collectors.dcmi.readings import (
    BoardReading,
    ChipId,
    ChipInfoReading,
    EccReading,
    HbmReading,
    MemoryReading,
    PcieReading,
    ProcessReading,
)
from collectors.dcmi.structs import (
    BoardInfo,
    ChipInfo,
    ChipInfoV2,
    EccInfo,
    Event,
    EventFilter,
    HbmInfo,
    MemoryInfoV3,
    PcieInfoAll,
    ProcMemInfo,
)

__all__ = ["ECC_MEMORIES", "EVENT_CALLBACK", "FREQUENCY_TYPES", "MAX_CARDS", "MAX_CHIPS", "UTILIZATION_TYPES", "Dcmi"]

MAX_CARDS = 64
MAX_CHIPS = 64  # the densest node: 16 NPUs x 2 dies (collectors.bounds LIMITS["max_chips"])
MAX_DEVICES_PER_CARD = 64
ERROR_CODE_SLOTS = 128  # npu-exporter passes 128 (shared/reference/README.md)
MAX_PROCESSES = 1024  # the process call takes no length: far more than a chip runs
VERSION_LEN = 64

# dcmi_get_device_utilization_rate input_type -> name (shared/reference/README.md, "dcmi/").
UTILIZATION_TYPES: dict[int, str] = {
    1: "ddr", 2: "aicore", 3: "aicpu", 6: "hbm", 10: "hbm_bandwidth", 12: "vectorcore", 13: "npu", 14: "aicube",
}
# enum dcmi_freq_type (reference header): clocks in MHz.
FREQUENCY_TYPES: dict[int, str] = {
    1: "ddr", 2: "ctrlcpu", 6: "hbm", 7: "aicore_current", 9: "aicore_max", 12: "vectorcore_current",
}
# enum dcmi_device_type values of the memories with ECC counters.
ECC_MEMORIES: dict[str, int] = {"ddr": 0, "hbm": 2}

_INT = ctypes.c_int
_UINT = ctypes.c_uint
_P_INT = ctypes.POINTER(ctypes.c_int)
_P_UINT = ctypes.POINTER(ctypes.c_uint)


def _v1(*after: Any) -> tuple[Any, ...]:
    return (_INT, _INT, *after)  # card_id, device_id


def _v2(*after: Any) -> tuple[Any, ...]:
    return (_INT, *after)  # logical device id


# typedef void (*dcmi_fault_event_callback)(struct dcmi_event *event)
EVENT_CALLBACK = ctypes.CFUNCTYPE(None, ctypes.POINTER(Event))

# Argument types of every function used (the reference headers' signatures; enums are C ints).
PROTOTYPES: dict[str, tuple[Any, ...]] = {
    "dcmi_init": (),
    "dcmiv2_init": (),
    "dcmi_get_dcmi_version": (ctypes.c_char_p, _INT),
    "dcmiv2_get_dcmi_version": (ctypes.c_char_p, _INT),
    "dcmi_get_card_list": (_P_INT, _P_INT, _INT),
    "dcmi_get_device_num_in_card": (_INT, _P_INT),
    "dcmi_get_device_logic_id": (_P_INT, _INT, _INT),
    "dcmi_get_device_phyid_from_logicid": (_UINT, _P_UINT),
    "dcmi_get_card_id_device_id_from_logicid": (_P_INT, _P_INT, _UINT),
    "dcmiv2_get_device_list": (_P_INT, _P_INT, _INT),
    "dcmiv2_get_chip_phy_id_by_dev_id": (_UINT, _P_UINT),
    "dcmi_get_device_health": _v1(_P_UINT),
    "dcmiv2_get_device_health": _v2(_P_UINT),
    "dcmi_get_device_errorcode_v2": _v1(_P_INT, _P_UINT, _UINT),
    "dcmiv2_get_device_error_code_list": _v2(_P_INT, _P_UINT, _UINT),
    "dcmi_get_device_temperature": _v1(_P_INT),
    "dcmiv2_get_device_temperature": _v2(_P_INT),
    "dcmi_get_device_power_info": _v1(_P_INT),
    "dcmiv2_get_device_power_info": _v2(_P_INT),
    "dcmi_get_device_utilization_rate": _v1(_INT, _P_UINT),
    "dcmiv2_get_device_utilization_rate": _v2(_INT, _P_UINT),
    "dcmi_get_device_hbm_info": _v1(ctypes.POINTER(HbmInfo)),
    "dcmiv2_get_device_hbm_info": _v2(ctypes.POINTER(HbmInfo)),
    "dcmi_get_device_memory_info_v3": _v1(ctypes.POINTER(MemoryInfoV3)),
    "dcmi_get_device_ecc_info": _v1(_INT, ctypes.POINTER(EccInfo)),
    "dcmiv2_get_device_ecc_info": _v2(_INT, ctypes.POINTER(EccInfo)),
    "dcmi_get_device_frequency": _v1(_INT, _P_UINT),
    "dcmiv2_get_device_frequency": _v2(_INT, _P_UINT),
    "dcmi_get_device_board_info": _v1(ctypes.POINTER(BoardInfo)),
    "dcmiv2_get_device_board_info": _v2(ctypes.POINTER(BoardInfo)),
    "dcmi_get_device_chip_info": _v1(ctypes.POINTER(ChipInfo)),
    "dcmi_get_device_chip_info_v2": _v1(ctypes.POINTER(ChipInfoV2)),
    "dcmiv2_get_device_chip_info": _v2(ctypes.POINTER(ChipInfoV2)),
    "dcmi_get_device_pcie_info_v2": _v1(ctypes.POINTER(PcieInfoAll)),
    "dcmiv2_get_device_pcie_info": _v2(ctypes.POINTER(PcieInfoAll)),
    "dcmi_get_device_resource_info": _v1(ctypes.POINTER(ProcMemInfo), _P_INT),
    "dcmiv2_get_device_proc_mem_info": _v2(ctypes.POINTER(ProcMemInfo), _P_INT),
    "dcmi_get_device_network_health": _v1(_P_INT),
    "dcmiv2_get_device_network_health": _v2(_P_INT),
    # the documented four-argument form (the reference header's prototype lacks the handler)
    "dcmi_subscribe_fault_event": (_INT, _INT, EventFilter, EVENT_CALLBACK),
}


def _api(name: str) -> str:
    return "v2" if name.startswith("dcmiv2_") else "v1"


def _text(raw: Any) -> str:
    """A NUL-padded C char array as text (non-ASCII bytes replaced, never an exception)."""
    return bytes(raw).split(b"\0", 1)[0].decode("ascii", "replace")


def _count(value: int, limit: int, what: str) -> int:
    if value < 0 or value > limit:
        raise DcmiInvalid(f"{what} {value} outside 0..{limit}")
    return value


class Dcmi:
    """One loaded library. Not thread-safe: the worker calls it strictly one call at a time."""

    def __init__(self, lib: Any) -> None:
        self._lib = lib
        self._functions: dict[str, Callable[..., int] | None] = {}
        self._disabled: dict[str, DcmiError] = {}  # api -> why its init failed
        self._pairs: dict[int, tuple[int, int]] = {}  # logical id -> (card, device)

    @classmethod
    def open(cls, path: str) -> Dcmi:
        """Load the library (OSError when it cannot be loaded)."""
        return cls(ctypes.CDLL(path, mode=ctypes.RTLD_GLOBAL))

    # --- symbols

    def function(self, name: str) -> Callable[..., int] | None:
        """The library's function, typed, or None when the library (or an API whose init failed) lacks it."""
        if not name:
            return None
        if name in self._functions:
            return self._functions[name]
        found: Callable[..., int] | None = None
        if _api(name) not in self._disabled:
            try:
                found = getattr(self._lib, name)
            except AttributeError:
                found = None
            if found is not None:
                found.argtypes = list(PROTOTYPES[name])  # type: ignore[attr-defined]
                found.restype = ctypes.c_int  # type: ignore[attr-defined]
        self._functions[name] = found
        return found

    def has(self, name: str) -> bool:
        return self.function(name) is not None

    def _call(self, name: str, *args: Any) -> None:
        function = self.function(name)
        if function is None:
            raise DcmiUnsupported((name,))
        check(name, function(*args))

    def init(self) -> tuple[str, ...]:
        """Initialise each API the library has; the APIs now usable ("v2", "v1").

        Raises the first init's ``DcmiError`` when none succeeds, ``DcmiUnsupported`` when the
        library has no init function at all.
        """
        ready = []
        errors = []
        for name in ("dcmiv2_init", "dcmi_init"):
            if not self.has(name):
                continue
            try:
                self._call(name)
            except DcmiError as exc:
                errors.append(exc)
                self._disabled[_api(name)] = exc
                self._functions = {}
                continue
            ready.append(_api(name))
        if not ready:
            if errors:
                raise errors[0]
            raise DcmiUnsupported(("dcmiv2_init", "dcmi_init"))
        return tuple(ready)

    def _per_chip(self, logic_id: int, v2: str, v1: str, *args: Any) -> None:
        """Call the v2 function with the logical id when the library has it, else v1 with card/device."""
        if self.has(v2):
            self._call(v2, logic_id, *args)
        elif self.has(v1):
            card, device = self._card_device(logic_id)
            self._call(v1, card, device, *args)
        else:
            raise DcmiUnsupported(tuple(name for name in (v2, v1) if name))

    def _card_device(self, logic_id: int) -> tuple[int, int]:
        if logic_id not in self._pairs:
            pair = self._pair_of(logic_id)
            if pair is None:
                self.chips()
                if logic_id not in self._pairs:
                    raise DcmiInvalid(f"no chip has logical id {logic_id}")
            else:
                self._pairs[logic_id] = pair
        return self._pairs[logic_id]

    def _pair_of(self, logic_id: int) -> tuple[int, int] | None:
        """Card and device of a logical id through the library; None when it cannot say."""
        card, device = ctypes.c_int(), ctypes.c_int()
        try:
            self._call("dcmi_get_card_id_device_id_from_logicid", ctypes.byref(card), ctypes.byref(device),
                       logic_id)
        except DcmiUnsupported:
            return None
        except DcmiError as exc:
            if exc.not_supported:
                return None
            raise
        return card.value, device.value

    def _optional_uint(self, name: str, *args: Any) -> int | None:
        """An id the chip list carries when the library knows it (missing or not supported: None)."""
        value = ctypes.c_uint()
        try:
            self._call(name, *args, ctypes.byref(value))
        except DcmiUnsupported:
            return None
        except DcmiError as exc:
            if exc.not_supported:
                return None
            raise
        return value.value

    # --- readings

    def version(self) -> str:
        buffer = ctypes.create_string_buffer(VERSION_LEN)
        name = "dcmiv2_get_dcmi_version" if self.has("dcmiv2_get_dcmi_version") else "dcmi_get_dcmi_version"
        self._call(name, buffer, VERSION_LEN)
        return buffer.value.decode("ascii", "replace")

    def chips(self) -> tuple[ChipId, ...]:
        """Every chip, in the library's order."""
        if self.has("dcmiv2_get_device_list"):
            return self._chips_v2()
        return self._chips_v1()

    def _chips_v2(self) -> tuple[ChipId, ...]:
        ids = (ctypes.c_int * MAX_CHIPS)()
        num = ctypes.c_int()
        self._call("dcmiv2_get_device_list", ids, ctypes.byref(num), MAX_CHIPS)
        chips = []
        for logic_id in ids[:_count(num.value, MAX_CHIPS, "device count")]:
            pair = self._pair_of(logic_id)
            if pair is not None:
                self._pairs[logic_id] = pair
            chips.append(ChipId(
                logic_id=logic_id,
                card_id=None if pair is None else pair[0],
                device_id=None if pair is None else pair[1],
                phy_id=self._optional_uint("dcmiv2_get_chip_phy_id_by_dev_id", logic_id),
            ))
        return tuple(chips)

    def _chips_v1(self) -> tuple[ChipId, ...]:
        cards = (ctypes.c_int * MAX_CARDS)()
        num = ctypes.c_int()
        self._call("dcmi_get_card_list", ctypes.byref(num), cards, MAX_CARDS)
        chips = []
        for card in cards[:_count(num.value, MAX_CARDS, "card count")]:
            devices = ctypes.c_int()
            self._call("dcmi_get_device_num_in_card", card, ctypes.byref(devices))
            for device in range(_count(devices.value, MAX_DEVICES_PER_CARD, f"card {card} device count")):
                logic = ctypes.c_int()
                self._call("dcmi_get_device_logic_id", ctypes.byref(logic), card, device)
                self._pairs[logic.value] = (card, device)
                chips.append(ChipId(
                    logic_id=logic.value, card_id=card, device_id=device,
                    phy_id=self._optional_uint("dcmi_get_device_phyid_from_logicid", logic.value),
                ))
        if len(chips) > MAX_CHIPS:
            raise DcmiInvalid(f"{len(chips)} chips, more than {MAX_CHIPS}")
        return tuple(chips)

    def health(self, logic_id: int) -> int:
        """0 healthy; anything else is not (the word npu-smi prints is ``records``' business)."""
        value = ctypes.c_uint()
        self._per_chip(logic_id, "dcmiv2_get_device_health", "dcmi_get_device_health", ctypes.byref(value))
        return value.value

    def error_codes(self, logic_id: int) -> tuple[int, ...]:
        """The chip's active error codes (unsigned 32-bit event ids)."""
        codes = (ctypes.c_uint * ERROR_CODE_SLOTS)()
        count = ctypes.c_int()
        self._per_chip(logic_id, "dcmiv2_get_device_error_code_list", "dcmi_get_device_errorcode_v2",
                       ctypes.byref(count), codes, ERROR_CODE_SLOTS)
        return tuple(codes[:_count(count.value, ERROR_CODE_SLOTS, "error count")])

    def temperature(self, logic_id: int) -> int:
        """Chip temperature, degrees Celsius."""
        value = ctypes.c_int()
        self._per_chip(logic_id, "dcmiv2_get_device_temperature", "dcmi_get_device_temperature",
                       ctypes.byref(value))
        return value.value

    def power(self, logic_id: int) -> int:
        """Chip power in units of 0.1 W."""
        value = ctypes.c_int()
        self._per_chip(logic_id, "dcmiv2_get_device_power_info", "dcmi_get_device_power_info", ctypes.byref(value))
        return value.value

    def utilization(self, logic_id: int, input_type: int) -> int:
        """A utilization rate in percent; ``input_type`` as in ``UTILIZATION_TYPES``."""
        value = ctypes.c_uint()
        self._per_chip(logic_id, "dcmiv2_get_device_utilization_rate", "dcmi_get_device_utilization_rate",
                       input_type, ctypes.byref(value))
        return value.value

    def frequency(self, logic_id: int, freq_type: int) -> int:
        """A clock in MHz; ``freq_type`` as in ``FREQUENCY_TYPES``."""
        value = ctypes.c_uint()
        self._per_chip(logic_id, "dcmiv2_get_device_frequency", "dcmi_get_device_frequency", freq_type,
                       ctypes.byref(value))
        return value.value

    def hbm(self, logic_id: int) -> HbmReading:
        info = HbmInfo()
        self._per_chip(logic_id, "dcmiv2_get_device_hbm_info", "dcmi_get_device_hbm_info", ctypes.byref(info))
        return HbmReading(memory_size=info.memory_size, memory_usage=info.memory_usage, freq_mhz=info.freq,
                          temperature_celsius=info.temp, bandwidth_util_percent=info.bandwith_util_rate)

    def memory(self, logic_id: int) -> MemoryReading:
        """DDR (v1 only: the v2 API has no memory call)."""
        info = MemoryInfoV3()
        self._per_chip(logic_id, "", "dcmi_get_device_memory_info_v3", ctypes.byref(info))
        return MemoryReading(
            memory_size_mb=info.memory_size, memory_available_mb=info.memory_available, freq_mhz=info.freq,
            hugepage_size_kb=info.hugepagesize, hugepages_total=info.hugepages_total,
            hugepages_free=info.hugepages_free, utilization_percent=info.utiliza,
        )

    def ecc(self, logic_id: int, memory: str) -> EccReading:
        """ECC counters of ``memory`` (a key of ``ECC_MEMORIES``)."""
        info = EccInfo()
        self._per_chip(logic_id, "dcmiv2_get_device_ecc_info", "dcmi_get_device_ecc_info", ECC_MEMORIES[memory],
                       ctypes.byref(info))
        return EccReading(
            enabled=bool(info.enable_flag),
            single_bit_errors=info.single_bit_error_cnt,
            double_bit_errors=info.double_bit_error_cnt,
            single_bit_total_errors=info.total_single_bit_error_cnt,
            double_bit_total_errors=info.total_double_bit_error_cnt,
            single_bit_isolated_pages=info.single_bit_isolated_pages_cnt,
            double_bit_isolated_pages=info.double_bit_isolated_pages_cnt,
            single_bit_next_isolated_pages=info.single_bit_next_isolated_pages_cnt,
            double_bit_next_isolated_pages=info.double_bit_next_isolated_pages_cnt,
        )

    def board(self, logic_id: int) -> BoardReading:
        info = BoardInfo()
        self._per_chip(logic_id, "dcmiv2_get_device_board_info", "dcmi_get_device_board_info", ctypes.byref(info))
        return BoardReading(board_id=info.board_id, pcb_id=info.pcb_id, bom_id=info.bom_id, slot_id=info.slot_id)

    def chip_info(self, logic_id: int) -> ChipInfoReading:
        """Chip type, name, version, AI Core count (and NPU name where the v2 struct is returned)."""
        if self.has("dcmiv2_get_device_chip_info") or self.has("dcmi_get_device_chip_info_v2"):
            info2 = ChipInfoV2()
            self._per_chip(logic_id, "dcmiv2_get_device_chip_info", "dcmi_get_device_chip_info_v2",
                           ctypes.byref(info2))
            return ChipInfoReading(chip_type=_text(info2.chip_type), chip_name=_text(info2.chip_name),
                                   chip_ver=_text(info2.chip_ver), aicore_count=info2.aicore_cnt,
                                   npu_name=_text(info2.npu_name))
        info = ChipInfo()
        self._per_chip(logic_id, "", "dcmi_get_device_chip_info", ctypes.byref(info))
        return ChipInfoReading(chip_type=_text(info.chip_type), chip_name=_text(info.chip_name),
                               chip_ver=_text(info.chip_ver), aicore_count=info.aicore_cnt, npu_name=None)

    def pcie(self, logic_id: int) -> PcieReading:
        info = PcieInfoAll()
        self._per_chip(logic_id, "dcmiv2_get_device_pcie_info", "dcmi_get_device_pcie_info_v2", ctypes.byref(info))
        return PcieReading(vendor_id=info.venderid, subvendor_id=info.subvenderid, device_id=info.deviceid,
                           subdevice_id=info.subdeviceid, domain=info.domain, bus=info.bdf_busid,
                           device=info.bdf_deviceid, function=info.bdf_funcid)

    def processes(self, logic_id: int) -> tuple[ProcessReading, ...]:
        table = (ProcMemInfo * MAX_PROCESSES)()
        count = ctypes.c_int()
        self._per_chip(logic_id, "dcmiv2_get_device_proc_mem_info", "dcmi_get_device_resource_info", table,
                       ctypes.byref(count))
        return tuple(ProcessReading(pid=entry.proc_id, memory_bytes=entry.proc_mem_usage)
                     for entry in table[:_count(count.value, MAX_PROCESSES, "process count")])

    def network_health(self, logic_id: int) -> int:
        """RoCE detection result (enum dcmi_rdfx_detect_result: 0 OK)."""
        value = ctypes.c_int()
        self._per_chip(logic_id, "dcmiv2_get_device_network_health", "dcmi_get_device_network_health",
                       ctypes.byref(value))
        return value.value
