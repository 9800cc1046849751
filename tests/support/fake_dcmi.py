"""The fake ``libdcmi.so`` (tests/fixtures/dcmi/fake_dcmi.c): building it, and the values it answers.

``build(variant, directory)`` compiles one variant with the system C compiler (``cc -shared
-fPIC``); ``compiled(tmp_path_factory)`` builds each variant once per test session. Without a C
compiler the tests that need the fake skip, saying so (CI installs gcc: scripts/test).

The ``expected_*`` functions are the fake's formulas, in the library's units, by logical id: a
test compares what the worker returns against them, so a wrong struct layout or a mixed-up id
shows as a wrong number.
"""

from __future__ import annotations

import itertools
import os
import shutil
import subprocess
from pathlib import Path

from tests.support.paths import FIXTURES

SOURCE = FIXTURES / "dcmi" / "fake_dcmi.c"
VARIANTS = {
    "full": (),
    "v1": ("-DFAKE_NO_V2",),  # no dcmiv2_* symbols: the card/device API only
    "v1_partial": ("-DFAKE_NO_V2", "-DFAKE_NO_SOME_V1"),  # and no hbm, network health, chip_info_v2
    "v2": ("-DFAKE_NO_V1",),  # no v1 symbols: no card/device ids
    "no_events": ("-DFAKE_NO_EVENTS",),  # no dcmi_subscribe_fault_event: the agent polls only
}
MISSING_IN_V1_PARTIAL = ("hbm", "network_health")


def compiler() -> str | None:
    return shutil.which("cc") or shutil.which("gcc")


def build(variant: str, directory: Path) -> Path:
    """Compile ``variant`` into ``directory``; CalledProcessError with the compiler's output on failure."""
    cc = compiler()
    if cc is None:
        raise FileNotFoundError("no C compiler (cc or gcc) on PATH")
    directory.mkdir(parents=True, exist_ok=True)
    target = directory / f"libdcmi-{variant}.so"
    subprocess.run([cc, "-shared", "-fPIC", "-O1", "-Wall", "-Werror", "-fvisibility=hidden",
                    "-pthread", *VARIANTS[variant], "-o", str(target), str(SOURCE)],
                   check=True, capture_output=True, text=True, timeout=120)
    return target


def chip_order(chips: int, per_card: int = 1, phy_base: int = 0) -> list[dict[str, int]]:
    """The chips in listing order: index i -> card, device, logical and physical id (``FAKE_DCMI_PHY_BASE``)."""
    return [{"card_id": i // per_card, "device_id": i % per_card, "logic_id": (i + 3) % chips, "phy_id": i + phy_base}
            for i in range(chips)]


def expected_temperature(logic: int) -> int:
    return 40 + logic


def expected_power_tenths(logic: int) -> int:
    return (100 + logic) * 10


def expected_health(logic: int) -> int:
    return logic % 4


def expected_error_codes(logic: int) -> list[int]:
    return [0x80E01800 + logic * 16 + k for k in range(logic % 3)]


def expected_utilization(logic: int, input_type: int, offset: int = 0) -> int:
    """``offset``: what the file named by ``FAKE_DCMI_UTIL_FILE`` holds."""
    return (input_type * 7 + logic + offset) % 101


def expected_frequency(logic: int, freq_type: int) -> int:
    return 1000 + freq_type * 100 + logic


def expected_hbm(logic: int) -> dict[str, int]:
    return {"memory_size": 65536 + logic * 1024, "memory_usage": 1000 + logic * 10, "freq_mhz": 1600 + logic,
            "temperature_celsius": 50 + logic, "bandwidth_util_percent": 20 + logic}


def expected_memory(logic: int) -> dict[str, int]:
    return {"memory_size_mb": 32768 + logic * 512, "memory_available_mb": 16384 + logic, "freq_mhz": 2666 + logic,
            "hugepage_size_kb": 2048, "hugepages_total": 100 + logic, "hugepages_free": 50 + logic,
            "utilization_percent": 10 + logic}


ECC_TYPES = {"ddr": 0, "hbm": 2}
ECC_FIELDS = ("single_bit_errors", "double_bit_errors", "single_bit_total_errors", "double_bit_total_errors",
              "single_bit_isolated_pages", "double_bit_isolated_pages", "single_bit_next_isolated_pages",
              "double_bit_next_isolated_pages")


def expected_ecc(logic: int, memory: str) -> dict[str, object]:
    base = ECC_TYPES[memory] * 1000 + logic * 10
    return {"enabled": True, **{name: base + k + 1 for k, name in enumerate(ECC_FIELDS)}}


def expected_board(logic: int) -> dict[str, int]:
    return {"board_id": 0x60 + logic, "pcb_id": 10 + logic, "bom_id": 20 + logic, "slot_id": logic}


def expected_chip_info(logic: int, v2_struct: bool = True) -> dict[str, object]:
    return {"chip_type": "Ascend", "chip_name": "910B3", "chip_ver": f"V{logic}", "aicore_count": 20 + logic,
            "npu_name": f"NPU-{logic}" if v2_struct else None}


def expected_pcie(logic: int) -> dict[str, int]:
    return {"vendor_id": 0x19E5, "subvendor_id": 0x0200, "device_id": 0xD802, "subdevice_id": 0x3000 + logic,
            "domain": 0, "bus": 0x80 + logic, "device": 0, "function": 0}


def expected_processes(logic: int) -> list[dict[str, int]]:
    return [{"pid": 1000 + logic * 10 + k, "memory_bytes": (k + 1) * (logic + 1) * 1048576} for k in range(logic % 3)]


def expected_network_health(logic: int) -> int:
    return 5 if logic % 3 == 2 else 0


_requests = itertools.count()


def send_events(directory: Path, *lines: str) -> None:
    """Ask the fake's event thread (``FAKE_DCMI_EVENTS=directory``) for events, one request a line
    (fake_dcmi.c says the verbs): written whole, then renamed, so the thread never reads half a file."""
    directory.mkdir(parents=True, exist_ok=True)
    name = f"{os.getpid()}-{next(_requests):06d}"
    partial = directory / f"{name}.part"
    partial.write_text("".join(f"{line}\n" for line in lines))
    partial.rename(directory / f"{name}.req")


def pending_events(directory: Path) -> list[Path]:
    """Requests the fake has not delivered yet."""
    return sorted(directory.glob("*.req"))


def raise_unseen(directory: Path, logic: int, code: str) -> None:
    """Add ``code`` to the chip's error-code list without an event, as ``raise-unseen`` does, for a library
    with no event thread to ask (the no_events variant, a refused subscription)."""
    state = directory / "state"
    lines = state.read_text().splitlines() if state.exists() else []
    partial = directory / "state.tmp"
    partial.write_text("".join(f"{line}\n" for line in [*lines, f"{logic} {code}"]))
    partial.rename(state)
