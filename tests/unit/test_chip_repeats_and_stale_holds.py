"""Two fault kinds over the agent's fault history: a chip held out of service while it reads healthy
(``held_while_healthy``) and a chip that faults again and again (``repeat_offender``)."""

from __future__ import annotations

from agent.handling.escalation import REPEAT_WINDOW_S, ChipHistory, Held, step
from agent.handling.history import _decode, _encode
from agent.health import faults
from agent.health.status import FAIL, WARN
from agent.health.thresholds import fault_kind
from collectors.fault_levels import default_table

RESET = "8C084E00"  # RestartNPU
NO_ACTION = "80E01801"  # RestartBusiness: not a fault that takes the chip out
HOUR = 3600.0


def _polls(seen: list[tuple[float, list[str]]]) -> ChipHistory:
    history = ChipHistory()
    for now, codes in seen:
        history = step(default_table(), history, "Alarm" if codes else "OK", codes, now)[0]
    return history


def test_each_appearance_of_a_reset_or_separate_code_is_one_fault_of_the_chip() -> None:
    history = _polls([(0, [RESET]), (60, [RESET]), (120, []), (180, [RESET, NO_ACTION]), (240, []), (300, [NO_ACTION])])
    assert history.faults == (0.0, 180.0)  # a code still active is the same fault; RestartBusiness is none
    assert _decode(_encode(history)).faults == history.faults  # kept in the state file


def test_faults_older_than_the_window_are_forgotten() -> None:
    history = _polls([(0, [RESET]), (60, []), (REPEAT_WINDOW_S + 61, [RESET])])
    assert history.faults == (REPEAT_WINDOW_S + 61,)


def test_a_chip_faulting_the_tables_times_in_the_window_is_a_repeat_offender() -> None:
    times = int(fault_kind("repeat_offender").threshold or 0)
    seen: list[tuple[float, list[str]]] = []
    for index in range(times):
        seen += [(index * HOUR, [RESET]), (index * HOUR + 60, [])]
    history = _polls(seen)
    now = times * HOUR
    found = faults.repeat_offender(history, now, npu=2, chip=0)
    assert found is not None and (found.kind, found.status, found.value) == ("repeat_offender", FAIL, times)
    assert faults.repeat_offender(_polls(seen[:-2]), now, npu=2, chip=0) is None  # one fault fewer
    assert faults.repeat_offender(history, (times - 1) * HOUR + REPEAT_WINDOW_S + 1, npu=2, chip=0) is None


def test_a_chip_held_while_it_reads_ok_with_no_code_for_the_tables_time_warns() -> None:
    limit = float(fault_kind("held_while_healthy").threshold or 0.0)
    held = ChipHistory(held={RESET: Held(0.0)}, cleared={RESET: 100.0})
    found = faults.held_while_healthy("OK", [], held, 100.0 + limit, npu=1, chip=0)
    assert found is not None and (found.kind, found.status) == ("held_while_healthy", WARN)
    assert faults.held_while_healthy("OK", [], held, 100.0 + limit - 1, npu=1, chip=0) is None  # not long enough
    assert faults.held_while_healthy("OK", [RESET], held, 100.0 + limit, npu=1, chip=0) is None  # a code is back
    assert faults.held_while_healthy("Alarm", [], held, 100.0 + limit, npu=1, chip=0) is None  # not healthy
    assert faults.held_while_healthy("OK", [], ChipHistory(cleared={RESET: 100.0}), 1e9, npu=1, chip=0) is None
    no_recovery = ChipHistory(held={RESET: Held(0.0)})
    assert faults.held_while_healthy("OK", [], no_recovery, 1e9, npu=1, chip=0) is None


def test_the_agents_gemm_probe_is_held_to_the_probe_limits() -> None:
    from agent.health.probe_limits import REFERENCE_FAIL, REFERENCE_WARN

    def kind(correct: bool, efficiency: float | None) -> str | None:
        return faults.gemm_probe(correct, efficiency, "fp16", fail_below=REFERENCE_FAIL.value,
                                 warn_below=REFERENCE_WARN.value, npu=0, chip=0).kind

    assert kind(True, 0.75) == "probe_failed"  # under 0.8 of peak fails, as probe_limits says
    assert kind(True, 0.85) == "probe_slow"
    assert kind(True, 0.95) is None and kind(True, None) is None
    assert kind(False, 0.99) == "probe_failed"
