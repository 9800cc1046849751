"""Every code and number of the packaged CANN error table (collectors/fault_data/cann_errors.json, generated from
the public registries) is read as the table says in the three formats jobs print it in: a plog line, a torch_npu
traceback line and a glog line; a code of each family that no registry lists gets its family's class."""

from __future__ import annotations

import pytest

from collectors.hccl import errtable
from collectors.hccl.classify import StreamClassifier
from collectors.hccl.codes import CATEGORIES
from collectors.hccl.errtable import Entry
from collectors.hccl.rules import classify_line

_TABLE = errtable.table()
_CANN = sorted(_TABLE["cann"])
_ACL = sorted(_TABLE["acl"])
_TORCH = sorted(_TABLE["torch_npu"])
_WRAPPERS = {code for code in _TORCH if errtable.torch_npu(code).nature == errtable.SYMPTOM_NATURE}


def _cann_lines(code: str) -> list[str]:
    return [
        f"{code}: [PID: 4100] 2026-03-02-10:40:00.000.000 the call failed.",
        f"[rank3]: RuntimeError: {code}: [PID: 4100] 2026-03-02-10:40:00.000.000 the call failed.",
        f"E0302 10:40:00.123456  4100 npu_worker.cpp:88] {code}: the call failed",
    ]


def _acl_lines(number: str) -> list[str]:
    return [
        f"[ERROR] ASCENDCL(4100,python3):2026-03-02-10:40:00.000.000 [log_inner.cpp:161]4100 ReportCallError: "
        f"call failed, runtime result = {number}.",
        f"[rank3]: RuntimeError: npuSynchronizeDevice:torch_npu/csrc/core/npu/NPUStream.cpp:467 NPU function error: "
        f"aclrtSynchronizeDevice, error code is {number}",
        f"E0302 10:40:00.123456  4100 npu_worker.cpp:88] Check failed: ret == ACL_SUCCESS (ErrCode={number}) "
        f"aclrtSetDevice failed",
    ]


def _torch_lines(code: str) -> list[str]:
    return [
        f"[ERROR] 2026-03-02-10:40:00 (PID:4100, Device:3, RankID:3) {code} the call failed",
        f"[rank3]: RuntimeError: the call failed {code}",
        f"E0302 10:40:00.123456  4100 npu_worker.cpp:88] torch_npu raised {code} the call failed",
    ]


def _expect(line: str, code: str, entry: Entry, provisional: bool) -> None:
    result = classify_line(line, 1.8e9)
    assert result is not None, line
    if provisional:
        # an envelope or a warning: the line's only reading, counted when nothing else in its failure is
        assert result.matches == ((code, entry.category),) and result.provisional, line
    else:
        assert result.matches[0] == (code, entry.category) and not result.provisional, line


@pytest.mark.parametrize("code", _CANN)
def test_every_cann_code_is_read_as_the_table_says(code: str) -> None:
    entry = errtable.cann(code)
    for line in _cann_lines(code):
        _expect(line, code, entry, entry.nature == errtable.SYMPTOM_NATURE or code[0] != "E")


@pytest.mark.parametrize("number", _ACL)
def test_every_acl_number_is_read_as_the_table_says(number: str) -> None:
    entry = errtable.acl(number)
    for line in _acl_lines(number):
        _expect(line, number, entry, entry.nature == errtable.SYMPTOM_NATURE)


@pytest.mark.parametrize("code", sorted(set(_TORCH) - _WRAPPERS))
def test_every_torch_npu_code_is_read_as_the_table_says(code: str) -> None:
    for line in _torch_lines(code):
        _expect(line, code, errtable.torch_npu(code), False)


@pytest.mark.parametrize("code", sorted(_WRAPPERS))
def test_a_torch_npu_wrapper_frames_the_error_printed_after_it(code: str) -> None:
    # ERRxx100 "call acl api failed": classified (a symptom), and the line alone counts nothing
    assert errtable.torch_npu(code).nature == errtable.SYMPTOM_NATURE
    for line in _torch_lines(code):
        result = classify_line(line, 1.8e9)
        assert result is None or not result.matches


@pytest.mark.parametrize("hex_code", sorted(_TABLE["ts"]))
def test_every_task_scheduler_code_details_the_acl_number(hex_code: str) -> None:
    entry = errtable.ts(hex_code)
    line = f"Kernel task happen error, retCode={hex_code}, [the task failed]."
    _expect(line, f"retCode={hex_code}", entry, True)
    # printed with its ACL number, the number leads
    result = classify_line(f"{line} runtime result = 507015.", 1.8e9)
    assert result is not None and result.matches[0] == ("507015", "aicore")


@pytest.mark.parametrize("hex_code", sorted(_TABLE["inner"]))
def test_every_runtime_inner_code_is_read(hex_code: str) -> None:
    line = f"[ERROR] RUNTIME(4100,python3):2026-03-02-10:40:00.000.000 [api_c.cc:70]4100 failed, InnerCode={hex_code}"
    _expect(line, f"InnerCode={hex_code}", errtable.inner(hex_code), True)


@pytest.mark.parametrize("errcode", sorted(_TABLE["aicpu"], key=int))
def test_every_aicpu_errcode_is_read(errcode: str) -> None:
    entry = errtable.aicpu(errcode)
    line = (f"[ERROR] RUNTIME(4100,python3):2026-03-02-10:40:00.000.000 [device_error_proc.cc:812]4100 "
            f"ProcessStarsAicpuErrorInfo: an exception occurred during AICPU execution, stream_id=3, task_id=9, "
            f"errcode:{errcode}, msg:the kernel failed")
    result = classify_line(line, 1.8e9)
    # an errcode of class other is still an AI CPU exception: the family's class
    category = entry.category if entry.category != "other" else errtable.aicpu("").category
    assert result is not None and result.matches[:1] == ((f"aicpu_errcode_{errcode}", category),)


@pytest.mark.parametrize("printed", sorted(_TABLE["ring"]))
def test_every_device_error_type_is_read_in_each_releases_wording(printed: str) -> None:
    entry = errtable.ring(printed)
    assert entry is not None
    expected = () if entry.category == "other" else (entry.category,)
    for line in (
        f"EZ9999: [PID: 4100] 2026-03-02-10:40:00.000.000 The error from device(0), serial number is 3, "
        f"there is an error of {printed}, core id is 7",
        f"EZ9999: [PID: 4100] 2026-03-02-10:40:00.000.000 The error from device(chipId:1, dieId:0), serial number "
        f"is 3, there is an exception of {printed}, core id is 7",
        f"EZ9999: [PID: 4100] 2026-03-02-10:40:00.000.000 An error occurs on the device(chipId:1, dieId:0), the "
        f"serial number is 3, the error is {printed}, core id is 7",
        f"[ERROR] RUNTIME(4100,python3):2026-03-02-10:40:00.000.000 [task_info.cc:1170]4100 "
        f"PrintErrorInfo:task failed, dev_id=1, err_type=11[{printed}]",
    ):
        result = classify_line(line, 1.8e9)
        if expected:
            assert result is not None and tuple(c for _, c in result.matches[:1]) == expected, line
        else:  # a type that says nothing of its own: the EZ9999 envelope, or nothing
            assert result is None or all(c == "other" for _, c in result.matches), line


@pytest.mark.parametrize("value", sorted(_TABLE["hccl_result"], key=int))
def test_every_hccl_result_is_read_from_a_failed_call_and_a_glog_check(value: str) -> None:
    entry = errtable.hccl_result(value)
    for line in (
        f"[rank0]: RuntimeError: create:torch_npu/csrc/distributed/ProcessGroupHCCL.cpp:291 HCCL function error: "
        f"hcclCommInitRootInfo(numRanks, &hcclId, rank, &comm), error code is {value}",
        f"F0302 10:40:00.123456  4100 hccl_comm.cpp:61] Check failed: status == HCCL_SUCCESS ({value} vs. 0) "
        f"HCCL get root info failed",
    ):
        result = classify_line(line, 1.8e9)
        assert result is not None, line
        if entry.category != "other":
            assert result.matches[0] == (f"hccl_result_{value}", entry.category), line
        else:  # an HCCL call failed and says no more: counted when nothing else near is
            assert result.provisional and result.matches[0][1] in ("other", "init"), line


@pytest.mark.parametrize(("line", "code", "category"), [
    ("E37777: [PID: 1] 2026-03-02-10:40:00.000.000 a new AI CPU error", "E37777", "aicore"),  # E3: AI CPU
    ("E68777: [PID: 1] 2026-03-02-10:40:00.000.000 a new cube operator error", "E68777", "operator"),
    ("EL0777: [PID: 1] 2026-03-02-10:40:00.000.000 a new driver error", "EL0777", "device_lost"),
    ("EQ0001: [PID: 1] 2026-03-02-10:40:00.000.000 a module nobody listed", "EQ0001", "other"),
    ("E18777: [PID: 1] 2026-03-02-10:40:00.000.000 a new GE option error", "E18777", "program_error"),
    ("call failed, runtime result = 108777.", "108777", "program_error"),
    ("call failed, runtime result = 208777.", "208777", "device_oom"),
    ("call failed, runtime result = 508777.", "508777", "other"),
    ("[ERROR] 2026-03-02-10:40:00 (PID:1, Device:3, RankID:3) ERR05123 a new submodule", "ERR05123", "other"),
    ("an exception occurred during AICPU execution, stream_id=3, errcode:777, msg:new", "aicpu_exception", "aicore"),
])
def test_a_code_no_registry_lists_gets_its_familys_class(line: str, code: str, category: str) -> None:
    result = classify_line(line, 1.8e9)
    assert result is not None and result.matches[0] == (code, category)


@pytest.mark.parametrize("line", [
    "Kernel task happen error, retCode=0x7ff, [new].",
    "[ERROR] RUNTIME(1,python3):2026-03-02-10:40:00.000.000 [api_c.cc:70]1 failed, InnerCode=0x7ffffff",
])
def test_an_unlisted_scheduler_or_inner_code_gets_its_familys_class(line: str) -> None:
    result = classify_line(line, 1.8e9)
    assert result is not None and result.provisional and result.matches[0][1] == "other"


def test_every_category_the_table_gives_is_a_category() -> None:
    names = {c.name for c in CATEGORIES}
    for family in ("cann", "cann_prefix", "acl", "ts", "inner", "torch_npu", "aicpu", "ring", "hccl_result"):
        assert {value[1] for value in _TABLE[family].values()} <= names, family


def test_a_symptom_never_leads_over_the_cause_in_its_failure() -> None:
    # 507011 (model execution failed) before and after the AI Core exception it follows: one incident, the cause
    lines = [
        "[ERROR] ASCENDCL(1,python3):2026-03-02-10:40:00.000.000 [model.cpp:88]1 execute model failed, "
        "runtime result = 507011.",
        "EZ9999: [PID: 1] 2026-03-02-10:40:00.100.000 The error from device(chipId:1, dieId:0), serial number is 3, "
        "there is an exception of fftsplus aicore error, core id is 7",
        "E39999: [PID: 1] 2026-03-02-10:40:00.200.000 Inner Error!",
        "[ERROR] ASCENDCL(1,python3):2026-03-02-10:40:00.300.000 [model.cpp:88]1 execute model failed, "
        "runtime result = 507011.",
    ]
    events, _ = StreamClassifier().feed_lines(lines)
    assert [(e.code, e.category) for e in events] == [("fftsplus_aicore_error", "aicore")]
    # alone, the symptom still counts: an error is never silent
    events, _ = StreamClassifier().feed_lines(lines[:1])
    assert [(e.code, e.category) for e in events] == [("507011", "other")]


def test_a_glog_check_on_an_hccl_call_reads_its_result() -> None:
    # xllm: the root info call failed; its HcclResult (7, resource unavailable) says no more, so the communicator
    # init failure it belongs to is read, provisionally (the specific error printed near it leads)
    line = ("F0302 10:40:00.123456  4100 hccl_comm.cpp:61] Check failed: status == HCCL_SUCCESS (7 vs. 0) "
            "HCCL get root info failed")
    result = classify_line(line, 1.8e9)
    assert result is not None and result.provisional
    assert result.matches == (("hccl_comm_init_failed", "init"),)
    # a result that says more leads: 11, TCP connect failed
    result = classify_line(line.replace("(7 vs. 0)", "(11 vs. 0)"), 1.8e9)
    assert result is not None and result.matches == (("hccl_result_11", "connect_timeout"),)
