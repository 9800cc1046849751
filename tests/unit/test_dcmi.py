"""collectors.dcmi and agent.dcmi without a library or a process: finding and vetting libdcmi.so on a
stated file system, return codes, the readings' JSON form, unit conversions into the npu-smi records,
the client's backoff schedule on an injected clock, and the node lock."""

from __future__ import annotations

import stat
import subprocess
from pathlib import Path
from typing import Any

import pytest

from agent.dcmi.client import Backoff, DcmiClient
from agent.dcmi.lock import NodeLock
from collectors.base import ChipRef
from collectors.bounds import MIB
from collectors.dcmi import records
from collectors.dcmi.errors import DcmiError, DcmiUnsupported, DcmiWorkerError, meaning
from collectors.dcmi.library import (
    STANDARD_DIRS,
    FileFacts,
    LibraryNotFound,
    candidates,
    find_library,
    ldconfig_paths,
    vet,
)
from collectors.dcmi.readings import (
    ChipId,
    ChipInfoReading,
    EccReading,
    HbmReading,
    MemoryReading,
    PcieReading,
    ProcessReading,
    from_json,
    to_json,
)
from collectors.npu_smi_usages import samples as usages_samples

FILE = stat.S_IFREG | 0o644
DIR = stat.S_IFDIR | 0o755


class StatedFs:
    """A file system given as {path: FileFacts}; ``links`` maps a path to its real path."""

    def __init__(self, entries: dict[str, FileFacts], links: dict[str, str] | None = None) -> None:
        self.entries = entries
        self.links = links or {}

    def real_path(self, path: str) -> str:
        return self.links.get(path, path)

    def facts(self, path: str) -> FileFacts | None:
        return self.entries.get(path)


def tree(library: str, *, uid: int = 0, mode: int = FILE, dir_modes: dict[str, int] | None = None,
         dir_uids: dict[str, int] | None = None) -> dict[str, FileFacts]:
    """The library and every directory above it, root-owned and 0755 unless stated."""
    entries = {library: FileFacts(uid, mode)}
    directory = str(Path(library).parent)
    while True:
        entries[directory] = FileFacts((dir_uids or {}).get(directory, 0), (dir_modes or {}).get(directory, DIR))
        if directory == "/":
            return entries
        directory = str(Path(directory).parent)


LIB = "/usr/local/dcmi/libdcmi.so"


# --- vetting


def test_a_root_owned_library_in_root_owned_directories_is_accepted() -> None:
    assert vet(LIB, StatedFs(tree(LIB))) == (LIB, None)


@pytest.mark.parametrize(("entries", "reason"), [
    (tree(LIB, uid=1000), f"{LIB}: the file is owned by uid 1000, not root"),
    (tree(LIB, mode=stat.S_IFREG | 0o664), f"{LIB}: the file is writable by group or others (mode 0664)"),
    (tree(LIB, mode=stat.S_IFREG | 0o646), f"{LIB}: the file is writable by group or others (mode 0646)"),
    (tree(LIB, dir_modes={"/usr/local": stat.S_IFDIR | 0o777}),
     f"{LIB}: /usr/local: the directory is writable by group or others (mode 0777)"),
    (tree(LIB, dir_uids={"/usr/local/dcmi": 1000}), f"{LIB}: /usr/local/dcmi: the directory is owned by uid 1000, "
                                                    "not root"),
    (tree(LIB, dir_modes={"/": stat.S_IFDIR | 0o1777}), f"{LIB}: /: the directory is writable by group or others "
                                                        "(mode 1777)"),
    (tree(LIB, mode=DIR), f"{LIB}: not a regular file"),
    ({}, f"{LIB}: not found"),
])
def test_a_library_anyone_but_root_could_replace_is_refused_naming_the_path(entries: dict[str, FileFacts],
                                                                             reason: str) -> None:
    assert vet(LIB, StatedFs(entries)) == (None, reason)


def test_a_symlink_is_judged_by_where_it_points() -> None:
    real = "/opt/driver/libdcmi.so.1"
    fs = StatedFs({**tree(real, dir_modes={"/opt": stat.S_IFDIR | 0o757}), **tree(LIB)}, links={LIB: real})
    assert vet(LIB, fs) == (None, f"{LIB} -> {real}: /opt: the directory is writable by group or others (mode 0757)")


def test_ldconfig_output_yields_only_libdcmi_paths() -> None:
    text = ("1234 libs found in cache `/etc/ld.so.cache'\n"
            "\tlibdcmi.so (libc6,x86-64) => /usr/local/Ascend/driver/lib64/driver/libdcmi.so\n"
            "\tlibdcmi.so.1 (libc6,x86-64) => /elsewhere/libdcmi.so.1\n"
            "\tlibdcmi_extra.so (libc6,x86-64) => /x/libdcmi_extra.so\n"
            "\tlibc.so.6 (libc6,x86-64) => /lib/x86_64-linux-gnu/libc.so.6\n")
    assert ldconfig_paths(text) == ["/usr/local/Ascend/driver/lib64/driver/libdcmi.so"]


def test_the_search_order_is_ld_library_path_then_ldconfig_then_the_driver_dirs() -> None:
    text = "\tlibdcmi.so (libc6,x86-64) => /from/ldconfig/libdcmi.so\n"
    assert candidates("/a::/b:/a", text) == [
        "/a/libdcmi.so", "/b/libdcmi.so", "/from/ldconfig/libdcmi.so",
        *(f"{directory}/libdcmi.so" for directory in STANDARD_DIRS),
    ]


def test_the_first_acceptable_candidate_wins_and_the_refused_ones_are_reported() -> None:
    bad = "/home/user/lib/libdcmi.so"
    good = "/usr/local/Ascend/driver/lib64/driver/libdcmi.so"
    fs = StatedFs({**tree(bad, uid=1000), **tree(good), **tree(LIB)})
    found = find_library(ld_library_path="/home/user/lib:/nowhere", fs=fs,
                         ldconfig=lambda: f"\tlibdcmi.so (libc6,x86-64) => {good}\n")
    assert (found.path, found.configured, found.warnings) == (good, False, ())
    assert found.refused == (f"{bad}: the file is owned by uid 1000, not root",)


def test_no_acceptable_library_raises_with_every_refusal() -> None:
    fs = StatedFs(tree(LIB, mode=stat.S_IFREG | 0o666))
    with pytest.raises(LibraryNotFound) as raised:
        find_library(fs=fs)
    assert raised.value.refused == (f"{LIB}: the file is writable by group or others (mode 0666)",)
    assert "libdcmi.so not found" in str(raised.value) and LIB in str(raised.value)


def test_a_configured_path_is_used_as_given_with_a_warning_and_no_search() -> None:
    configured = "/tmp/build/libdcmi.so"
    fs = StatedFs(tree(configured, dir_modes={"/tmp": stat.S_IFDIR | 0o1777}))

    def no_search() -> str:
        raise AssertionError("ldconfig must not run for a configured path")

    found = find_library(configured, ldconfig=no_search, fs=fs)
    assert (found.path, found.configured) == (configured, True)
    assert found.warnings == (f"{configured}: /tmp: the directory is writable by group or others (mode 1777) "
                              "(used anyway: configured as collectors.dcmi.library)",)
    assert find_library(LIB, fs=StatedFs(tree(LIB))).warnings == ()
    with pytest.raises(LibraryNotFound, match=r"configured as collectors\.dcmi\.library, but no such file"):
        find_library("/nowhere/libdcmi.so", fs=fs)


@pytest.mark.parametrize(("path", "fs_tree", "why"), [
    ("/opt/drop/libdcmi.so", tree("/opt/drop/libdcmi.so", dir_modes={"/opt/drop": stat.S_IFDIR | 0o777}),
     "/opt/drop is writable by any user (mode 0777)"),
    ("/opt/lib/libdcmi.so", tree("/opt/lib/libdcmi.so", dir_modes={"/opt": stat.S_IFDIR | 0o757}),
     "/opt is writable by any user (mode 0757)"),
    ("/opt/lib/libdcmi.so", tree("/opt/lib/libdcmi.so", mode=stat.S_IFREG | 0o666),
     "/opt/lib/libdcmi.so is writable by any user (mode 0666)"),
    ("/tmp/libdcmi.so", tree("/tmp/libdcmi.so", mode=stat.S_IFREG | 0o646,
                             dir_modes={"/tmp": stat.S_IFDIR | 0o1777}),
     "/tmp/libdcmi.so is writable by any user (mode 0646)"),
])
def test_a_configured_library_any_user_could_replace_is_refused_unless_allowed(path: str, fs_tree: dict,
                                                                               why: str) -> None:
    fs = StatedFs(fs_tree)
    with pytest.raises(LibraryNotFound) as raised:
        find_library(path, fs=fs)
    assert str(raised.value) == (f"{path}: refused as collectors.dcmi.library: {why}, so anyone could run code in "
                                 "the agent (set collectors.dcmi.allow_writable_library: true to load it anyway)")
    found = find_library(path, allow_writable=True, fs=fs)
    assert found.path == path and found.warnings and found.warnings[0].endswith(
        "(used anyway: configured as collectors.dcmi.library)")


def test_the_agent_refuses_a_configured_library_in_a_world_writable_directory(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    import logging

    from agent.core.config import build_config
    from agent.dcmi.setup import open_backend

    drop = tmp_path / "drop"
    drop.mkdir()
    library = drop / "libdcmi.so"
    library.write_bytes(b"not loaded")
    drop.chmod(0o777)
    config = build_config({"collectors": {"dcmi": {"enabled": True, "library": str(library),
                                                   "lock_file": str(tmp_path / "dcmi.lock")}}})
    with caplog.at_level(logging.WARNING, logger="agent.dcmi.setup"):
        assert open_backend(config) is None
    assert f"{drop} is writable by any user (mode 0777)" in caplog.text
    assert "the chips are read through npu-smi" in caplog.text


# --- errors and readings


@pytest.mark.parametrize(("code", "text", "retryable", "not_supported"), [
    (-8001, "invalid parameter", False, False),
    (-8002, "permission denied", False, False),
    (-8006, "timed out", True, False),
    (-8012, "not ready, try again", True, False),
    (-8013, "not supported in a container", False, True),
    (-8255, "not supported on this chip", False, True),
    (-9999, "error -9999", False, False),
])
def test_return_codes_map_to_typed_errors(code: int, text: str, retryable: bool, not_supported: bool) -> None:
    error = DcmiError(code, "dcmi_get_device_temperature")
    assert (error.code, error.meaning, error.retryable, error.not_supported) == (code, text, retryable, not_supported)
    assert str(error) == f"dcmi_get_device_temperature: {text} ({code})" and meaning(code) == text


def test_unsupported_names_the_missing_functions() -> None:
    assert str(DcmiUnsupported(("dcmiv2_get_device_hbm_info", "dcmi_get_device_hbm_info"))) == \
        "libdcmi.so has no dcmiv2_get_device_hbm_info or dcmi_get_device_hbm_info"


def test_readings_survive_their_json_form_and_a_changed_payload_is_refused() -> None:
    hbm = HbmReading(memory_size=65536, memory_usage=1200, freq_mhz=1600, temperature_celsius=51,
                     bandwidth_util_percent=7)
    assert from_json(HbmReading, to_json(hbm)) == hbm
    assert to_json((ChipId(3, 0, 0, 32),)) == [{"logic_id": 3, "card_id": 0, "device_id": 0, "phy_id": 32}]
    with pytest.raises(ValueError, match="differ"):
        from_json(HbmReading, {**to_json(hbm), "extra": 1})
    with pytest.raises(ValueError, match="expected an object"):
        from_json(HbmReading, [1, 2])


# --- records: units and bounds


def test_power_in_tenths_of_a_watt_becomes_watts() -> None:
    assert records.power_record(1005).power_watts == pytest.approx(100.5)
    assert records.power_record(0).power_watts == 0.0
    rejected = records.power_record(-10)
    assert rejected.power_watts is None and "outside" in str(rejected.rejected[0])
    assert records.power_record(30000).power_watts is None  # 3 kW is no chip's reading


def test_temperature_is_celsius_within_bounds() -> None:
    assert records.temp_record(47).temperature_celsius == 47.0
    assert records.temp_record(200).temperature_celsius is None


def test_health_words_and_error_codes_as_npu_smi_prints_them() -> None:
    record = records.health_record(2, [0x80E01801, 0x8C03A000, 0x80E01801, 0x1F])
    assert record.health == "Alarm"
    assert record.error_codes == ("80E01801", "8C03A000", "0000001F")
    assert [records.health_word(value) for value in (0, 1, 3, 0xFFFFFFFF)] == ["OK", "Warning", "Critical", "UNKNOWN"]
    many = records.health_record(0, range(1, 70))
    assert len(many.error_codes) == 64 and many.rejected


def test_utilization_percent_becomes_the_usages_ratios_by_input_type() -> None:
    hbm = HbmReading(memory_size=65536, memory_usage=1000, freq_mhz=1600, temperature_celsius=50,
                     bandwidth_util_percent=33)
    memory = MemoryReading(memory_size_mb=32768, memory_available_mb=16384, freq_mhz=2666, hugepage_size_kb=2048,
                           hugepages_total=100, hugepages_free=40, utilization_percent=12)
    record = records.usages_record({1: 5, 2: 50, 3: 7, 6: 25, 12: 60, 13: 70, 14: 80}, hbm, memory)
    assert (record.ddr_usage_ratio, record.aicore_usage_ratio, record.aicpu_usage_ratio) == (0.05, 0.5, 0.07)
    assert (record.hbm_usage_ratio, record.vectorcore_usage_ratio, record.npu_utilization_ratio,
            record.aicube_usage_ratio) == (0.25, 0.6, 0.7, 0.8)
    assert record.hbm_bandwidth_usage_ratio == 0.33  # no input_type 10: from the HBM reading
    assert record.hbm_capacity_bytes == 65536 * MIB and record.ddr_capacity_bytes == 32768 * MIB
    assert record.ddr_hugepages_total_pages == 100
    assert records.usages_record({10: 9}, hbm).hbm_bandwidth_usage_ratio == 0.09  # input_type 10 wins
    out = records.usages_record({2: 101})
    assert out.aicore_usage_ratio is None and out.rejected
    # the npu-smi sample builder takes the record as it takes the parser's: vectorcore stands in for aivector
    samples = {s.metric: s.value for s in usages_samples([record], ChipRef(0, 0))}
    assert samples["npu_aivector_utilization_ratio"] == 0.6 and samples["npu_aicpu_utilization_ratio"] == 0.07


def test_memory_sizes_in_mb_clocks_in_mhz() -> None:
    hbm = HbmReading(memory_size=65536, memory_usage=1000, freq_mhz=1600, temperature_celsius=50,
                     bandwidth_util_percent=0)
    memory = MemoryReading(memory_size_mb=32768, memory_available_mb=16384, freq_mhz=2666, hugepage_size_kb=2048,
                           hugepages_total=100, hugepages_free=40, utilization_percent=12)
    record = records.memory_record(hbm, memory)
    assert (record.hbm_capacity_bytes, record.hbm_clock_hertz, record.hbm_temperature_celsius) == \
        (65536 * MIB, 1600e6, 50.0)
    assert (record.ddr_capacity_bytes, record.ddr_clock_hertz) == (32768 * MIB, 2666e6)
    assert records.memory_record().hbm_capacity_bytes is None


def test_ecc_counts_keep_their_names() -> None:
    hbm = EccReading(True, 1, 2, 3, 4, 5, 6, 7, 8)
    record = records.ecc_record(hbm=hbm)
    assert record.hbm.count("single", "isolated_pages") == 5 and record.hbm.count("double", "next_isolated_pages") == 8
    assert record.ddr.single_bit_errors is None


def test_common_record_takes_the_aicore_clocks_by_frequency_type() -> None:
    info = ChipInfoReading("Ascend", "910B3", "V1", 20, None)
    record = records.common_record({7: 800, 9: 1800}, temperature=45, power_tenths=935, chip_info=info,
                                   utilization={2: 30, 6: 4})
    assert (record.aicore_frequency_hertz, record.aicore_max_frequency_hertz) == (800e6, 1800e6)
    assert (record.aicore_count, record.temperature_celsius, record.power_watts) == (20, 45.0, 93.5)
    assert (record.aicore_usage_ratio, record.hbm_usage_ratio) == (0.3, 0.04)


def test_board_and_pcie_facts_in_npu_smi_notation() -> None:
    from collectors.dcmi.readings import BoardReading

    pcie = PcieReading(0x19E5, 0x0200, 0xD802, 0x3000, 0, 0xC1, 0, 0)
    record = records.board_record(BoardReading(0x65, 1, 2, 3), ChipInfoReading("Ascend", "910B3", "V1", 20, None), pcie)
    assert (record.board_id, record.pcb_id, record.bom_id, record.slot_id) == ("0x65", "1", "2", "3")
    assert (record.chip_name, record.chip_type, record.pcie_bus_info) == ("910B3", "Ascend", "0000:C1:00.0")
    assert (record.pci_vendor_id, record.pci_device_id, record.subsystem_device_id) == ("0x19E5", "0xD802", "0x3000")


def test_network_health_in_hccn_tool_words() -> None:
    assert records.net_health_record(0).healthy
    assert [records.net_health_record(value).state for value in (1, 5, 6, 42)] == \
        ["Socket failed", "Fault", "Init", "Result 42"]


def test_chip_status_is_the_info_table_row_of_the_chip() -> None:
    chip = ChipId(logic_id=5, card_id=2, device_id=0, phy_id=34)
    hbm = HbmReading(memory_size=65536, memory_usage=1000, freq_mhz=1600, temperature_celsius=50,
                     bandwidth_util_percent=0)
    memory = MemoryReading(memory_size_mb=32768, memory_available_mb=16384, freq_mhz=2666, hugepage_size_kb=2048,
                           hugepages_total=100, hugepages_free=40, utilization_percent=12)
    status = records.chip_status(chip, health=0, chip_info=ChipInfoReading("Ascend", "910B3", "V1", 20, None),
                                 power_tenths=1005, temperature=45, aicore_percent=30, hbm=hbm, memory=memory,
                                 pcie=PcieReading(0x19E5, 0, 0xD802, 0, 0, 0x82, 0, 0))
    assert status is not None
    assert (status.npu, status.chip, status.phy_id, status.device_id, status.name, status.health) == \
        (2, 0, 34, 5, "910B3", "OK")
    assert (status.power_watts, status.temperature_celsius, status.aicore_ratio, status.bus_id) == \
        (100.5, 45.0, 0.3, "0000:82:00.0")
    assert (status.hbm_used_bytes, status.hbm_total_bytes) == (1000 * MIB, 65536 * MIB)
    assert (status.memory_used_bytes, status.memory_total_bytes) == (16384 * MIB, 32768 * MIB)
    assert (status.hugepages_used, status.hugepages_total) == (60, 100)
    assert records.chip_status(ChipId(5, None, None, 34), health=0) is None  # v2 only: no npu-smi ids


def test_processes_become_the_info_tables_rows() -> None:
    rows = records.processes(ChipId(5, 2, 1, 34), [ProcessReading(1234, 3 * MIB), ProcessReading(0, 1)])
    assert [(row.npu, row.chip, row.pid, row.memory_bytes) for row in rows] == [(2, 1, 1234, 3 * MIB)]


# --- the client without a process


def test_backoff_doubles_from_its_base_up_to_its_cap() -> None:
    backoff = Backoff(base_s=1.0, factor=2.0, max_s=30.0)
    assert [backoff.delay(n) for n in range(8)] == [0.0, 1.0, 2.0, 4.0, 8.0, 16.0, 30.0, 30.0]


def test_a_worker_that_cannot_start_is_retried_only_after_the_backoff() -> None:
    now = [100.0]
    launches: list[list[str]] = []

    def launch(argv: list[str], **kwargs: Any) -> subprocess.Popen[bytes]:
        launches.append(argv)
        raise FileNotFoundError(argv[0])

    client = DcmiClient("/usr/local/dcmi/libdcmi.so", python="/no/python", clock=lambda: now[0], launch=launch,
                        backoff=Backoff(base_s=2.0, max_s=5.0))
    observed: list[tuple[str, str | None]] = []
    client.observe = lambda name, seconds, kind: observed.append((name, kind))

    def attempt() -> str:
        with pytest.raises(DcmiWorkerError) as raised:
            client.call("chips")
        return raised.value.reason

    assert attempt() == "startup" and client.retry_in() == 2.0
    assert launches == [["/no/python", "-m", "collectors.dcmi.worker", "--library", "/usr/local/dcmi/libdcmi.so"]]
    now[0] += 1.9
    assert attempt() == "backoff" and len(launches) == 1
    now[0] += 0.1
    assert attempt() == "startup" and client.retry_in() == 4.0 and len(launches) == 2
    now[0] += 4.0
    assert attempt() == "startup" and client.retry_in() == 5.0  # capped
    assert client.failures == 3 and client.errors == {"startup": 3, "backoff": 1} and client.calls == 4
    assert observed == [("chips", "startup"), ("chips", "backoff"), ("chips", "startup"), ("chips", "startup")]
    assert client.starts == 0 and client.pid is None
    client.close()
    assert attempt() == "closed"


# --- the node lock


def test_the_node_lock_is_exclusive_until_released(tmp_path: Path) -> None:
    path = tmp_path / "run" / "dcmi.lock"
    first, second = NodeLock(path), NodeLock(path, sleep=lambda _s: None)
    assert first.acquire(0) and first.held
    assert not second.acquire(0.05)  # another open file: flock refuses it even in this process
    first.release()
    assert second.acquire(0) and second.held
    second.close()
    first.close()
    assert path.exists()
