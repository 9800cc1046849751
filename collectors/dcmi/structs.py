"""ctypes layouts of the DCMI structs this package reads, declared from the reference header's facts.

Only the structs a reading uses are declared. ``tests/integration/test_dcmi_layout.py`` compiles a
program against the reference header (shared/reference/dcmi) and holds every size and field offset
here to what the C compiler lays out; ``LAYOUTS`` is the list it walks, with each struct's C name.

Two fields are ``unsigned long`` in C (``c_ulong``: 8 bytes on the LP64 Linux of Ascend nodes, 4 on
a 32-bit build); everything else has a fixed width.
"""

from __future__ import annotations

import ctypes

__all__ = [
    "CHIP_NAME_LEN",
    "EVENT_NAME_LEN",
    "LAYOUTS",
    "BoardInfo",
    "ChipInfo",
    "ChipInfoV2",
    "DmsFaultEvent",
    "EccInfo",
    "Event",
    "EventFilter",
    "HbmInfo",
    "MemoryInfoV3",
    "PcieInfoAll",
    "ProcMemInfo",
]

CHIP_NAME_LEN = 32


class ChipInfo(ctypes.Structure):
    """``struct dcmi_chip_info``: chip type, name and version as NUL-padded text, AI Core count."""

    _fields_ = [
        ("chip_type", ctypes.c_ubyte * CHIP_NAME_LEN),
        ("chip_name", ctypes.c_ubyte * CHIP_NAME_LEN),
        ("chip_ver", ctypes.c_ubyte * CHIP_NAME_LEN),
        ("aicore_cnt", ctypes.c_uint),
    ]


class ChipInfoV2(ctypes.Structure):
    """``struct dcmi_chip_info_v2``: ``dcmi_chip_info`` plus the NPU name."""

    _fields_ = [
        ("chip_type", ctypes.c_ubyte * CHIP_NAME_LEN),
        ("chip_name", ctypes.c_ubyte * CHIP_NAME_LEN),
        ("chip_ver", ctypes.c_ubyte * CHIP_NAME_LEN),
        ("aicore_cnt", ctypes.c_uint),
        ("npu_name", ctypes.c_ubyte * CHIP_NAME_LEN),
    ]


class PcieInfoAll(ctypes.Structure):
    """``struct dcmi_pcie_info_all``: PCI ids and the bus address (64 bytes with its reserve)."""

    _fields_ = [
        ("venderid", ctypes.c_uint),
        ("subvenderid", ctypes.c_uint),
        ("deviceid", ctypes.c_uint),
        ("subdeviceid", ctypes.c_uint),
        ("domain", ctypes.c_int),
        ("bdf_busid", ctypes.c_uint),
        ("bdf_deviceid", ctypes.c_uint),
        ("bdf_funcid", ctypes.c_uint),
        ("reserve", ctypes.c_ubyte * 32),
    ]


class EccInfo(ctypes.Structure):
    """``struct dcmi_ecc_info``: one memory's ECC counters and isolated pages."""

    _fields_ = [
        ("enable_flag", ctypes.c_int),
        ("single_bit_error_cnt", ctypes.c_uint),
        ("double_bit_error_cnt", ctypes.c_uint),
        ("total_single_bit_error_cnt", ctypes.c_uint),
        ("total_double_bit_error_cnt", ctypes.c_uint),
        ("single_bit_isolated_pages_cnt", ctypes.c_uint),
        ("double_bit_isolated_pages_cnt", ctypes.c_uint),
        ("single_bit_next_isolated_pages_cnt", ctypes.c_uint),
        ("double_bit_next_isolated_pages_cnt", ctypes.c_uint),
    ]


class HbmInfo(ctypes.Structure):
    """``struct dcmi_hbm_info``: note the padding: ``freq`` and ``temp`` are each followed by 4 bytes."""

    _fields_ = [
        ("memory_size", ctypes.c_ulonglong),
        ("freq", ctypes.c_uint),
        ("memory_usage", ctypes.c_ulonglong),
        ("temp", ctypes.c_int),
        ("bandwith_util_rate", ctypes.c_uint),
    ]


class MemoryInfoV3(ctypes.Structure):
    """``struct dcmi_get_memory_info_stru`` (``dcmi_get_device_memory_info_v3``): DDR.

    112 bytes on LP64 (4 bytes of padding before ``hugepagesize``); the header's comment says 96, the
    size where ``unsigned long`` is 4 bytes."""

    _fields_ = [
        ("memory_size", ctypes.c_ulonglong),
        ("memory_available", ctypes.c_ulonglong),
        ("freq", ctypes.c_uint),
        ("hugepagesize", ctypes.c_ulong),
        ("hugepages_total", ctypes.c_ulong),
        ("hugepages_free", ctypes.c_ulong),
        ("utiliza", ctypes.c_uint),
        ("reserve", ctypes.c_ubyte * 60),
    ]


class ProcMemInfo(ctypes.Structure):
    """``struct dcmi_proc_mem_info``: one process on the chip and its device memory."""

    _fields_ = [
        ("proc_id", ctypes.c_int),
        ("proc_mem_usage", ctypes.c_ulong),
    ]


class BoardInfo(ctypes.Structure):
    """``struct dcmi_board_info``."""

    _fields_ = [
        ("board_id", ctypes.c_uint),
        ("pcb_id", ctypes.c_uint),
        ("bom_id", ctypes.c_uint),
        ("slot_id", ctypes.c_uint),
    ]


# (ctypes class, C struct name): what the layout conformance test compares.
EVENT_NAME_LEN = 256
EVENT_DATA_LEN = 32
EVENT_RESV_LEN = 32


class DmsFaultEvent(ctypes.Structure):
    """``struct dcmi_dms_fault_event``: one fault event as the driver hands it to the subscriber."""

    _fields_ = [
        ("event_id", ctypes.c_uint),
        ("deviceid", ctypes.c_ushort),
        ("node_type", ctypes.c_ubyte),
        ("node_id", ctypes.c_ubyte),
        ("sub_node_type", ctypes.c_ubyte),
        ("sub_node_id", ctypes.c_ubyte),
        ("severity", ctypes.c_ubyte),
        ("assertion", ctypes.c_ubyte),
        ("event_serial_num", ctypes.c_int),
        ("notify_serial_num", ctypes.c_int),
        ("alarm_raised_time", ctypes.c_ulonglong),
        ("event_name", ctypes.c_char * EVENT_NAME_LEN),
        ("additional_info", ctypes.c_char * EVENT_DATA_LEN),
        ("resv", ctypes.c_ubyte * EVENT_RESV_LEN),
    ]


class _EventUnion(ctypes.Union):
    _fields_ = [("dms_event", DmsFaultEvent)]


class Event(ctypes.Structure):
    """``struct dcmi_event``: ``type`` (0, ``DCMI_DMS_FAULT_EVENT``) and the event."""

    _fields_ = [("type", ctypes.c_int), ("event_t", _EventUnion)]


class EventFilter(ctypes.Structure):
    """``struct dcmi_event_filter``, passed by value; all zero: every event."""

    _fields_ = [
        ("filter_flag", ctypes.c_ulonglong),
        ("event_id", ctypes.c_uint),
        ("severity", ctypes.c_ubyte),
        ("node_type", ctypes.c_ubyte),
        ("resv", ctypes.c_ubyte * EVENT_RESV_LEN),
    ]


LAYOUTS = (
    (ChipInfo, "dcmi_chip_info"),
    (ChipInfoV2, "dcmi_chip_info_v2"),
    (PcieInfoAll, "dcmi_pcie_info_all"),
    (EccInfo, "dcmi_ecc_info"),
    (HbmInfo, "dcmi_hbm_info"),
    (MemoryInfoV3, "dcmi_get_memory_info_stru"),
    (ProcMemInfo, "dcmi_proc_mem_info"),
    (BoardInfo, "dcmi_board_info"),
    (DmsFaultEvent, "dcmi_dms_fault_event"),
    (Event, "dcmi_event"),
    (EventFilter, "dcmi_event_filter"),
)
