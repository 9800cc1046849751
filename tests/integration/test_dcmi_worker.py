"""The DCMI worker and client against the fake libdcmi.so (tests/fixtures/dcmi/fake_dcmi.c).

Every value is checked against the fake's formula for that chip (tests.support.fake_dcmi), on 8 and
16 chips, one chip per card and two: a struct read at the wrong offset or a logical id mixed up with
a card id shows as a wrong number. Faults are the fake's: an error code on demand, a call that never
returns, a call that segfaults, a library that prints to stdout.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest

from agent.dcmi.client import Backoff, DcmiClient
from collectors.dcmi.errors import DcmiBadRequest, DcmiCallHung, DcmiError, DcmiUnsupported, DcmiWorkerError
from tests.support import fake_dcmi as fake

FakeLibrary = Callable[[str], Path]


@pytest.fixture
def make_client(tmp_path: Path) -> Iterator[Callable[..., DcmiClient]]:
    clients: list[DcmiClient] = []

    def make(library: Path, env: dict[str, str] | None = None, **options: Any) -> DcmiClient:
        options.setdefault("call_timeout", 10.0)
        client = DcmiClient(str(library), env=env, **options)
        clients.append(client)
        return client

    yield make
    for client in clients:
        client.close()


def _children() -> list[psutil.Process]:
    return [child for child in psutil.Process().children(recursive=True) if child.is_running()
            and child.status() != psutil.STATUS_ZOMBIE]


def _check_chip(client: DcmiClient, logic: int, *, v2_struct: bool = True, hbm: bool = True,
                network: bool = True) -> None:
    assert client.call("temperature", chip=logic) == fake.expected_temperature(logic)
    assert client.call("power", chip=logic) == fake.expected_power_tenths(logic)
    assert client.call("health", chip=logic) == fake.expected_health(logic)
    assert client.call("error_codes", chip=logic) == fake.expected_error_codes(logic)
    for input_type in (1, 2, 3, 6, 10, 12, 13, 14):
        assert client.call("utilization", chip=logic, input_type=input_type) == \
            fake.expected_utilization(logic, input_type)
    for freq_type in (1, 2, 6, 7, 9, 12):
        assert client.call("frequency", chip=logic, freq_type=freq_type) == fake.expected_frequency(logic, freq_type)
    if hbm:
        assert client.call("hbm", chip=logic) == fake.expected_hbm(logic)
    for memory in ("ddr", "hbm"):
        assert client.call("ecc", chip=logic, memory=memory) == fake.expected_ecc(logic, memory)
    assert client.call("board", chip=logic) == fake.expected_board(logic)
    assert client.call("chip_info", chip=logic) == fake.expected_chip_info(logic, v2_struct)
    assert client.call("pcie", chip=logic) == fake.expected_pcie(logic)
    assert client.call("processes", chip=logic) == fake.expected_processes(logic)
    if network:
        assert client.call("network_health", chip=logic) == fake.expected_network_health(logic)


@pytest.mark.parametrize(("chips", "per_card"), [(8, 1), (16, 1), (16, 2)])
def test_every_reading_of_every_chip_matches_the_fake(fake_dcmi: FakeLibrary, make_client: Callable[..., DcmiClient],
                                                      chips: int, per_card: int) -> None:
    client = make_client(fake_dcmi("full"), {"FAKE_DCMI_CHIPS": str(chips),
                                             "FAKE_DCMI_DEVICES_PER_CARD": str(per_card)})
    listed = client.call("chips")
    assert listed == fake.chip_order(chips, per_card)
    assert client.ready["apis"] == ["v2", "v1"] and client.ready["version"] == "fake-24.1.0"
    for chip in listed:
        _check_chip(client, chip["logic_id"])
    assert client.starts == 1 and client.restarts == 0 and not client.errors


def test_v2_functions_are_preferred_and_v1_fills_what_v2_lacks(fake_dcmi: FakeLibrary, tmp_path: Path,
                                                               make_client: Callable[..., DcmiClient]) -> None:
    log = tmp_path / "calls.log"
    client = make_client(fake_dcmi("full"), {"FAKE_DCMI_LOG": str(log)})
    client.call("chips")
    assert client.call("temperature", chip=5) == fake.expected_temperature(5)
    assert client.call("memory", chip=5) == fake.expected_memory(5)  # no v2 memory call
    calls = log.read_text().split()
    assert calls.count("dcmiv2_init") == 1 and calls.count("dcmi_init") == 1
    assert "dcmiv2_get_device_temperature" in calls and "dcmi_get_device_temperature" not in calls
    assert "dcmi_get_device_memory_info_v3" in calls


def test_the_v1_only_library_serves_every_reading(fake_dcmi: FakeLibrary,
                                                  make_client: Callable[..., DcmiClient]) -> None:
    client = make_client(fake_dcmi("v1"), {"FAKE_DCMI_CHIPS": "8", "FAKE_DCMI_DEVICES_PER_CARD": "2"})
    listed = client.call("chips")
    assert client.ready["apis"] == ["v1"]
    assert listed == fake.chip_order(8, 2)
    for chip in listed:
        _check_chip(client, chip["logic_id"])
        assert client.call("memory", chip=chip["logic_id"]) == fake.expected_memory(chip["logic_id"])


def test_the_v2_only_library_has_no_card_ids_and_no_ddr(fake_dcmi: FakeLibrary,
                                                        make_client: Callable[..., DcmiClient]) -> None:
    client = make_client(fake_dcmi("v2"))
    listed = client.call("chips")
    assert client.ready["apis"] == ["v2"]
    assert listed == [{**chip, "card_id": None, "device_id": None} for chip in fake.chip_order(8)]
    _check_chip(client, 6)
    with pytest.raises(DcmiUnsupported) as raised:
        client.call("memory", chip=6)
    assert raised.value.functions == ("dcmi_get_device_memory_info_v3",)


def test_a_missing_symbol_turns_off_that_reading_only(fake_dcmi: FakeLibrary,
                                                      make_client: Callable[..., DcmiClient]) -> None:
    client = make_client(fake_dcmi("v1_partial"))
    for logic in (0, 4, 7):
        for call in fake.MISSING_IN_V1_PARTIAL:
            with pytest.raises(DcmiUnsupported) as raised:
                client.call(call, chip=logic)
            assert f"dcmi_get_device_{'hbm_info' if call == 'hbm' else call}" in raised.value.functions
        _check_chip(client, logic, v2_struct=False, hbm=False, network=False)  # chip_info from the v1 struct
    assert client.starts == 1 and client.errors == {"unsupported": 6}


@pytest.mark.parametrize(("code", "retryable", "not_supported"), [(-8012, True, False), (-8255, False, True)])
def test_an_error_code_is_a_typed_error_and_the_worker_stays(fake_dcmi: FakeLibrary,
                                                             make_client: Callable[..., DcmiClient], code: int,
                                                             retryable: bool, not_supported: bool) -> None:
    client = make_client(fake_dcmi("full"), {"FAKE_DCMI_FAIL": f"dcmiv2_get_device_power_info:{code}"})
    pid = client.call("chips") and client.pid
    with pytest.raises(DcmiError) as raised:
        client.call("power", chip=2)
    error = raised.value
    assert (error.code, error.function) == (code, "dcmiv2_get_device_power_info")
    assert (error.retryable, error.not_supported) == (retryable, not_supported)
    assert client.call("temperature", chip=2) == fake.expected_temperature(2)
    assert client.pid == pid and client.errors == {"dcmi": 1}


def test_a_bad_request_is_refused_by_the_worker(fake_dcmi: FakeLibrary, make_client: Callable[..., DcmiClient]) -> None:
    client = make_client(fake_dcmi("full"))
    for call, args in (("nope", {}), ("temperature", {}), ("utilization", {"chip": 1, "input_type": 4}),
                       ("ecc", {"chip": 1, "memory": "sram"}), ("chips", {"chip": 1})):
        with pytest.raises(DcmiBadRequest):
            client.call(call, **args)
    assert client.call("temperature", chip=1) == fake.expected_temperature(1)


def test_an_init_failure_is_a_startup_error(fake_dcmi: FakeLibrary, make_client: Callable[..., DcmiClient]) -> None:
    client = make_client(fake_dcmi("v1"), {"FAKE_DCMI_FAIL": "dcmi_init:-8002"})
    with pytest.raises(DcmiWorkerError) as raised:
        client.call("chips")
    assert raised.value.reason == "startup" and raised.value.code == -8002
    assert "permission denied" in str(raised.value)
    assert client.pid is None and _children() == []


def test_library_output_on_stdout_does_not_corrupt_the_answers(fake_dcmi: FakeLibrary,
                                                               make_client: Callable[..., DcmiClient]) -> None:
    client = make_client(fake_dcmi("full"), {"FAKE_DCMI_NOISE": "1"})
    assert client.call("temperature", chip=3) == fake.expected_temperature(3)


def test_a_hung_call_is_answered_for_and_skipped_for_a_growing_backoff_while_the_worker_runs_on(
        fake_dcmi: FakeLibrary, make_client: Callable[..., DcmiClient]) -> None:
    """Issue 41: one call that never returns must not restart the helper (and cost its fault events)."""
    now = [1000.0]
    client = make_client(fake_dcmi("full"), {"FAKE_DCMI_HANG": "dcmiv2_get_device_hbm_info"},
                         clock=lambda: now[0], hung_backoff=Backoff(base_s=30.0))
    assert client.call("temperature", chip=1) == fake.expected_temperature(1)
    worker = client.pid
    started = time.monotonic()
    with pytest.raises(DcmiCallHung) as raised:
        client.call("hbm", chip=1, timeout=2.0)
    assert raised.value.kind == "timeout" and raised.value.call == "hbm"
    assert time.monotonic() - started < 2.0  # the worker answered before the client's deadline
    assert client.pid == worker and client.failures == 0
    assert client.call("temperature", chip=1) == fake.expected_temperature(1)  # another call's answer ...
    with pytest.raises(DcmiCallHung) as held:
        client.call("hbm", chip=2)  # ... does not end the hung call's backoff: it fails at once
    assert held.value.kind == "backoff" and client.held() == {"hbm": 30.0}
    answers = client.call_batch([("hbm", {"chip": 0}), ("power", {"chip": 0})])
    assert isinstance(answers[0].error, DcmiCallHung) and answers[1].get() == fake.expected_power_tenths(0)
    now[0] += 30.0  # tried again: it hangs again, and waits twice as long
    with pytest.raises(DcmiCallHung):
        client.call("hbm", chip=1, timeout=2.0)
    assert client.held() == {"hbm": 60.0}
    assert client.pid == worker and (client.starts, client.restarts) == (1, 0)
    assert client.errors == {"timeout": 2, "backoff": 2}
    assert len(psutil.Process(worker).threads()) >= 3  # the two threads left in the library, and more


def test_a_worker_with_too_many_threads_left_in_the_library_is_replaced(
        fake_dcmi: FakeLibrary, make_client: Callable[..., DcmiClient]) -> None:
    client = make_client(fake_dcmi("full"), {"FAKE_DCMI_HANG": "dcmiv2_get_device_hbm_info"},
                         hung_backoff=Backoff(base_s=0.0))  # no backoff: every call of it hangs
    client.call("chips")
    first = client.pid
    for _ in range(5):  # the worker keeps 4; the fifth makes it exit
        with pytest.raises(DcmiCallHung):
            client.call("hbm", chip=1, timeout=2.0)
    psutil.Process(first).wait(5)
    with pytest.raises(DcmiWorkerError) as raised:
        client.call("temperature", chip=1)
    assert raised.value.reason == "died" and client.restarts == 0


def _wait_stopped(pid: int) -> None:
    """Until every thread of ``pid`` is stopped (SIGSTOP reaches each thread a moment after kill returns)."""
    deadline = time.monotonic() + 5
    tasks = Path(f"/proc/{pid}/task")
    while time.monotonic() < deadline:
        states = [(task / "stat").read_text().rsplit(")", 1)[1].split()[0] for task in tasks.iterdir()]
        if all(state in ("T", "t") for state in states):
            return
        time.sleep(0.01)
    raise AssertionError(f"worker {pid} did not stop")


def test_a_worker_that_stops_answering_is_killed_at_the_deadline_and_restarted_after_the_backoff(
        fake_dcmi: FakeLibrary, make_client: Callable[..., DcmiClient]) -> None:
    now = [1000.0]
    client = make_client(fake_dcmi("full"), clock=lambda: now[0], backoff=Backoff(base_s=30.0))
    assert client.call("temperature", chip=1) == fake.expected_temperature(1)
    first = psutil.Process(client.pid)
    first.suspend()  # the whole process, its watchdog too
    _wait_stopped(first.pid)
    started = time.monotonic()
    with pytest.raises(DcmiWorkerError) as raised:
        client.call("hbm", chip=1, timeout=1.0)
    assert raised.value.reason == "timeout"
    assert time.monotonic() - started < 8  # the deadline cut the wait short
    assert not first.is_running() or first.status() == psutil.STATUS_ZOMBIE
    assert _children() == []
    with pytest.raises(DcmiWorkerError) as backing_off:
        client.call("temperature", chip=1)  # within the backoff: fails at once
    assert backing_off.value.reason == "backoff" and client.retry_in() == 30.0
    now[0] += 30.0
    assert client.call("temperature", chip=1) == fake.expected_temperature(1)
    assert client.pid != first.pid and (client.starts, client.restarts) == (2, 1)
    assert client.errors == {"timeout": 1, "backoff": 1} and client.failures == 0


def test_a_segfault_is_a_typed_error_and_the_next_call_restarts_the_worker(
        fake_dcmi: FakeLibrary, make_client: Callable[..., DcmiClient]) -> None:
    now = [0.0]
    client = make_client(fake_dcmi("full"), {"FAKE_DCMI_CRASH": "dcmiv2_get_device_board_info"},
                         clock=lambda: now[0])
    with pytest.raises(DcmiWorkerError) as raised:
        client.call("board", chip=0)
    assert raised.value.reason == "died" and "signal 11" in str(raised.value)
    assert _children() == []
    now[0] += client.backoff.delay(1)
    assert client.call("power", chip=0) == fake.expected_power_tenths(0)
    assert client.restarts == 1


def test_a_killed_worker_is_replaced_on_the_next_call(fake_dcmi: FakeLibrary,
                                                      make_client: Callable[..., DcmiClient]) -> None:
    now = [0.0]
    client = make_client(fake_dcmi("full"), clock=lambda: now[0])
    client.call("chips")
    victim = psutil.Process(client.pid)
    victim.kill()
    victim.wait(5)
    with pytest.raises(DcmiWorkerError) as raised:
        client.call("temperature", chip=4)
    assert raised.value.reason == "died"
    now[0] += 1.0
    assert client.call("temperature", chip=4) == fake.expected_temperature(4)
    assert client.pid != victim.pid


def test_close_leaves_no_process_behind(fake_dcmi: FakeLibrary, make_client: Callable[..., DcmiClient]) -> None:
    client = make_client(fake_dcmi("full"))
    client.call("chips")
    assert [child.pid for child in _children()] == [client.pid]
    client.close()
    assert _children() == []
    with pytest.raises(DcmiWorkerError) as raised:
        client.call("chips")
    assert raised.value.reason == "closed"


def test_close_during_a_hang_leaves_no_process_behind(fake_dcmi: FakeLibrary,
                                                      make_client: Callable[..., DcmiClient]) -> None:
    client = make_client(fake_dcmi("full"), {"FAKE_DCMI_HANG": "dcmiv2_get_device_power_info"})
    client.call("chips")
    with pytest.raises(DcmiCallHung):
        client.call("power", chip=1, timeout=0.5)  # a thread of the worker's stays in the library
    client.close()
    assert _children() == []


def test_the_node_lock_keeps_a_second_client_from_calling_at_once(
        fake_dcmi: FakeLibrary, make_client: Callable[..., DcmiClient], tmp_path: Path) -> None:
    lock = tmp_path / "run" / "dcmi.lock"
    slow = make_client(fake_dcmi("full"), {"FAKE_DCMI_HANG": "dcmiv2_get_device_hbm_info"}, lock_file=lock)
    other = make_client(fake_dcmi("full"), lock_file=lock)
    slow.call("chips")
    outcome: list[BaseException] = []

    def hang() -> None:
        try:
            slow.call("hbm", chip=0, timeout=3.0)
        except BaseException as exc:
            outcome.append(exc)

    thread = threading.Thread(target=hang)
    thread.start()
    try:
        deadline = time.monotonic() + 5
        while not any(child.pid == slow.pid for child in _children()) and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(0.3)  # the slow call now holds the lock
        with pytest.raises(DcmiWorkerError) as raised:
            other.call("temperature", chip=0, timeout=0.5)
        assert raised.value.reason == "busy" and other.starts == 0
    finally:
        thread.join(10)
    assert isinstance(outcome[0], DcmiCallHung) and outcome[0].kind == "timeout"
    assert other.call("temperature", chip=0) == fake.expected_temperature(0)  # free again


def test_a_batch_answers_every_call_in_order_in_one_round_trip(fake_dcmi: FakeLibrary,
                                                               make_client: Callable[..., DcmiClient]) -> None:
    client = make_client(fake_dcmi("full"), {"FAKE_DCMI_FAIL": "dcmiv2_get_device_power_info:-8255"})
    calls: list[tuple[str, dict[str, Any]]] = [("temperature", {"chip": 1}), ("power", {"chip": 1}),
                                               ("utilization", {"chip": 5, "input_type": 2}),
                                               ("nope", {}), ("temperature", {"chip": 6})]
    answers = client.call_batch(calls)
    assert [a.value for a in answers] == [fake.expected_temperature(1), None, fake.expected_utilization(5, 2),
                                          None, fake.expected_temperature(6)]
    assert isinstance(answers[1].error, DcmiError) and answers[1].error.code == -8255
    assert isinstance(answers[3].error, DcmiBadRequest)
    with pytest.raises(DcmiError):
        answers[1].get()
    # each call is counted, as single calls are; the worker stayed
    assert client.calls == 5 and client.errors == {"dcmi": 1, "bad_request": 1} and client.starts == 1
    assert client.call_batch([]) == []


def test_utilizations_reads_every_chip_listed_in_one_answer_line(fake_dcmi: FakeLibrary,
                                                                make_client: Callable[..., DcmiClient]) -> None:
    client = make_client(fake_dcmi("full"), {"FAKE_DCMI_CHIPS": "16"})
    chips = [chip["logic_id"] for chip in client.call("chips")]
    assert client.call("utilizations", chips=chips, input_type=2) == [
        {"ok": True, "value": fake.expected_utilization(logic, 2)} for logic in chips]
    for args in ({"chips": [], "input_type": 2}, {"chips": [1, -1], "input_type": 2}, {"chips": [1], "input_type": 4},
                 {"chips": 1, "input_type": 2}):
        with pytest.raises(DcmiBadRequest):
            client.call("utilizations", **args)
    failing = make_client(fake_dcmi("full"), {"FAKE_DCMI_FAIL": "dcmiv2_get_device_utilization_rate:-8005"})
    each = failing.call("utilizations", chips=[0, 3], input_type=2)  # each chip's error in its place
    assert [item["ok"] for item in each] == [False, False]
    assert each[0]["error"]["kind"] == "dcmi" and each[0]["error"]["code"] == -8005
    assert failing.call("temperature", chip=3) == fake.expected_temperature(3)


def test_a_batch_the_worker_cannot_read_is_refused_whole(fake_dcmi: FakeLibrary,
                                                         make_client: Callable[..., DcmiClient]) -> None:
    from collectors.dcmi import worker
    assert next(iter(worker.answers(None, b'{"id": 3, "batch": {"call": "chips"}}')))["error"]["kind"] == "bad_request"
    too_many = b'{"id": 4, "batch": [' + b",".join([b'{"call": "version"}'] * (worker.MAX_BATCH + 1)) + b"]}"
    refused = list(worker.answers(None, too_many))
    assert len(refused) == 1 and "at most" in refused[0]["error"]["message"]


def test_a_hung_call_in_a_batch_is_answered_for_at_its_own_deadline_and_the_rest_is_served(
        fake_dcmi: FakeLibrary, make_client: Callable[..., DcmiClient]) -> None:
    client = make_client(fake_dcmi("full"), {"FAKE_DCMI_HANG": "dcmiv2_get_device_hbm_info"},
                         backoff=Backoff(base_s=30.0))
    started = time.monotonic()
    answers = client.call_batch([("temperature", {"chip": 0}), ("power", {"chip": 0}), ("hbm", {"chip": 0}),
                                 ("temperature", {"chip": 1})], timeout=2.0)
    assert time.monotonic() - started < 2.0
    assert [a.value for a in answers] == [fake.expected_temperature(0), fake.expected_power_tenths(0), None,
                                          fake.expected_temperature(1)]
    assert isinstance(answers[2].error, DcmiCallHung) and answers[2].error.kind == "timeout"
    assert client.calls == 4 and client.errors == {"timeout": 1} and client.starts == 1


def test_a_long_batch_is_answered_in_parts_within_each_calls_deadline(fake_dcmi: FakeLibrary,
                                                                      make_client: Callable[..., DcmiClient]) -> None:
    """The worker writes what it has every FLUSH_S (0.25 s): eight calls of 0.1 s each pass with a 0.4 s
    deadline per call, where one write at the end (0.8 s after the request) would overrun it."""
    client = make_client(fake_dcmi("full"), {"FAKE_DCMI_DELAY_US": "100000"})
    client.call("chips")
    answers = client.call_batch([("temperature", {"chip": chip}) for chip in range(8)], timeout=0.4)
    assert [a.get() for a in answers] == [fake.expected_temperature(chip) for chip in range(8)]
    assert client.errors == {} and client.starts == 1
