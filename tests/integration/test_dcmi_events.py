"""The driver's fault events through the real helper and the real agent, read back from /metrics: the fake
libdcmi.so (tests/fixtures/dcmi/fake_dcmi.c) calls the subscribed handler on a thread of its own when a
test drops a request in its directory. No npu-smi on PATH: every chip reading is DCMI's."""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from agent.dcmi.client import Backoff, DcmiClient
from collectors.dcmi.errors import DcmiWorkerError
from collectors.dcmi.records import health_word
from collectors.fault_levels import default_table, judge_static
from tests.support import fake_dcmi as fake
from tests.support.agent_harness import get
from tests.support.dcmi_agent import LibraryAgent, chip_labels

CHIPS = 8
SEPARATE = "80818C00"  # a SeparateNPU code of the default table
RESTART = "80E18008"  # RestartNPU


@pytest.fixture
def library_agent(fake_dcmi: Callable[[str], Path], tmp_path: Path) -> Iterator[Callable[..., LibraryAgent]]:
    started: list[LibraryAgent] = []

    def start(variant: str = "full", config: dict[str, Any] | None = None,
              env: dict[str, str] | None = None) -> LibraryAgent:
        agent = LibraryAgent(tmp_path / f"agent{len(started)}", fake_dcmi(variant), config, env, chips=CHIPS)
        started.append(agent)
        agent.ready()
        return agent

    yield start
    for agent in started:
        agent.stop()
        assert not agent.helpers(), "a DCMI helper outlived the agent"


def _key(metric: str, chip: str, **labels: str) -> str:
    """A series as the exposition prints it (label names sorted)."""
    pairs = dict(part.split("=", 1) for part in chip.split(","))
    pairs.update({name: f'"{value}"' for name, value in labels.items()})
    return metric + "{" + ",".join(f"{name}={pairs[name]}" for name in sorted(pairs)) + "}"


def _active(chip: str, code: str, level: str) -> str:
    return _key("npu_error_code_active", chip, code=code, handling=level)


def _handling(chip: str, level: str) -> str:
    return _key("npu_fault_handling", chip, handling=level)


def _counted(chip: str, severity: str, assertion: str) -> str:
    return _key("npuwatch_dcmi_events_total", chip, severity=severity, assertion=assertion)


def _codes_of(series: dict[str, float], chip: str, code: str) -> list[str]:
    npu = chip.split(",")[1]
    return [name for name in series if name.startswith("npu_error_code_active{") and npu in name
            and f'code="{code}"' in name]


def _level(logic: int, code: str) -> str:
    """The handling level a poll gives ``code`` on that chip (the first occurrence: no history yet)."""
    return judge_static(default_table(), health_word(fake.expected_health(logic)), [code]).codes[code]


def test_a_raised_code_and_its_recovery_are_on_metrics_within_2_seconds(
        library_agent: Callable[..., LibraryAgent]) -> None:
    agent = library_agent()
    before = agent.metrics()
    assert before["npuwatch_dcmi_subscription_up"] == 1 and before["npuwatch_dcmi_subscription_available"] == 1
    chip = chip_labels(1, CHIPS)
    level = _level(1, SEPARATE)
    assert level == "SeparateNPU"
    sent = agent.send(f"raise 1 {SEPARATE} 3")
    raised = agent.wait(lambda s: s.get(_active(chip, SEPARATE, level)) == 1, timeout=2.0)
    took = time.time() - sent
    assert raised is not None, f"the raised code was not on /metrics within 2 s: {agent.log_text()[-2000:]}"
    assert raised[_handling(chip, "SeparateNPU")] == 1
    assert raised.get(_counted(chip, "critical", "raised")) == 1
    assert raised["npuwatch_dcmi_event_latency_seconds_count"] == 1
    assert 0 <= raised["npuwatch_dcmi_event_latency_seconds_sum"] <= took + 0.01
    assert raised["npuwatch_dcmi_last_event_timestamp_seconds"] == pytest.approx(sent, abs=1.0)
    assert raised['npuwatch_dcmi_events_dropped_total{reason="unknown_chip"}'] == 0

    agent.send(f"recover 1 {SEPARATE} 3")
    cleared = agent.wait(lambda s: not _codes_of(s, chip, SEPARATE), timeout=2.0)
    assert cleared is not None, "the recovery was not on /metrics within 2 s"
    assert _handling(chip, "SeparateNPU") not in cleared
    assert cleared.get(_counted(chip, "critical", "recovery")) == 1
    assert cleared["npuwatch_dcmi_event_latency_seconds_count"] == 1  # a recovery carries its fault's time


def test_an_appearance_that_events_report_over_is_judged_for_how_long_it_lasted(
        library_agent: Callable[..., LibraryAgent], tmp_path: Path) -> None:
    """A code raised, then recovered 2 s later, with a 1-second duration rule: each event is judged at the time it
    came (as the device plugin's TestHandleFaultQueue cases), so the level holds through the recovery for the
    rule's RecoverTimeout; judged only as the recovery left the codes, the appearance would have lasted nothing."""
    code = "80E21007"  # NotHandleFault in the default table
    rules = tmp_path / "faultCustomization.json"
    rules.write_text(json.dumps({"FaultDuration": [{"EventId": [code], "FaultTimeout": 1, "RecoverTimeout": 600,
                                                    "FaultHandling": "PreSeparateNPU"}]}), encoding="utf-8")
    agent = library_agent(config={"faults": {"escalation_file": str(rules)}})
    chip = chip_labels(0, CHIPS)  # a chip that lists no code of its own
    agent.send(f"raise 0 {code} 1")
    assert agent.wait(lambda s: any(_codes_of(s, chip, code)), timeout=10.0) is not None
    time.sleep(2.0)
    agent.send(f"recover 0 {code} 1")
    cleared = agent.wait(lambda s: not _codes_of(s, chip, code), timeout=10.0)
    assert cleared is not None, "the recovery was not on /metrics within 10 s"
    assert cleared.get(_handling(chip, "PreSeparateNPU")) == 1, agent.log_text()[-2000:]


def test_an_event_that_names_its_chip_by_physical_id_reaches_that_chip(
        library_agent: Callable[..., LibraryAgent]) -> None:
    # logical 7 is physical 4, and 4 is also another chip's logical id (the fake's ids overlap as a 910B's do)
    agent = library_agent(env={"FAKE_DCMI_EVENT_PHY": "1"})
    chip = chip_labels(7, CHIPS)
    agent.send(f"raise 7 {SEPARATE} 3")
    assert agent.wait(lambda s: s.get(_active(chip, SEPARATE, _level(7, SEPARATE))) == 1, timeout=2.0) is not None
    assert [k for k in agent.metrics() if f'code="{SEPARATE}"' in k] == [_active(chip, SEPARATE, "SeparateNPU")]


def test_a_one_off_event_is_counted_and_never_active(library_agent: Callable[..., LibraryAgent],
                                                      promtool: str) -> None:
    agent = library_agent()
    chip = chip_labels(2, CHIPS)
    agent.send(f"once 2 {RESTART} 1")
    counted = agent.wait(lambda s: s.get(_counted(chip, "minor", "once")) == 1, timeout=2.0)
    assert counted is not None
    for _ in range(20):  # and never shows as active meanwhile
        assert not _codes_of(agent.metrics(), chip, RESTART)
        time.sleep(0.02)
    # the stream's families (a histogram among them) pass promtool's lint
    body = get(agent.url + "/metrics")[1]
    assert b"npuwatch_dcmi_event_latency_seconds_bucket" in body
    lint = subprocess.run([promtool, "check", "metrics"], input=body, capture_output=True, timeout=30, check=False)
    assert lint.returncode == 0, lint.stdout.decode() + lint.stderr.decode()


def test_a_burst_of_1000_events_in_a_second_is_counted_once_each(library_agent: Callable[..., LibraryAgent]) -> None:
    agent = library_agent()
    agent.send(f"burst 1000 0 {RESTART} 0 2 1000")

    def total(series: dict[str, float]) -> float:
        return sum(v for k, v in series.items() if k.startswith("npuwatch_dcmi_events_total{"))

    done = agent.wait(lambda s: total(s) >= 1000, timeout=10.0, step=0.05)
    assert done is not None, f"only {total(agent.metrics())} of 1000 events counted"
    time.sleep(0.5)  # nothing more comes: each event is counted once
    after = agent.metrics()
    assert total(after) == 1000
    per_chip = {k: v for k, v in after.items() if k.startswith("npuwatch_dcmi_events_total{")}
    assert sorted(per_chip.values()) == [125.0] * CHIPS  # the burst went round the 8 chips
    assert after['npuwatch_dcmi_events_dropped_total{reason="unknown_chip"}'] == 0
    assert after['npuwatch_dcmi_events_dropped_total{reason="unreadable"}'] == 0
    assert after["npuwatch_dcmi_event_latency_seconds_count"] == 1000
    assert not [k for k in after if f'code="{RESTART}"' in k]  # one-offs: none active


def test_a_burst_of_raises_and_recoveries_ends_as_the_last_event_says(
        library_agent: Callable[..., LibraryAgent]) -> None:
    agent = library_agent()
    agent.send(*[line for k in range(100) for line in (f"raise 3 {RESTART} 2", f"recover 3 {RESTART} 2")],
               f"raise 3 {SEPARATE} 3")
    chip = chip_labels(3, CHIPS)
    done = agent.wait(lambda s: s.get(_counted(chip, "major", "recovery")) == 100
                      and s.get(_counted(chip, "critical", "raised")) == 1, timeout=5.0)
    assert done is not None
    assert done.get(_counted(chip, "major", "raised")) == 100
    assert not _codes_of(done, chip, RESTART)
    assert len(_codes_of(done, chip, SEPARATE)) == 1


def test_the_next_poll_reconciles_a_missed_event_and_a_code_both_paths_saw_is_one_fault(
        library_agent: Callable[..., LibraryAgent]) -> None:
    agent = library_agent(config={"collectors": {"npu_smi": {"health_interval": "2s"}}})
    chip = chip_labels(4, CHIPS)
    agent.send(f"raise 4 {SEPARATE} 3")
    assert agent.wait(lambda s: len(_codes_of(s, chip, SEPARATE)) == 1, timeout=2.0) is not None
    # Polls come and go while the code is active in both the event stream and the library's list: one series.
    polls = agent.metrics()['npuwatch_collector_last_success_timestamp_seconds{collector="npu_smi_health"}']
    later = agent.wait(lambda s: s['npuwatch_collector_last_success_timestamp_seconds{collector="npu_smi_health"}']
                       > polls, timeout=6.0, step=0.1)
    assert later is not None and len(_codes_of(later, chip, SEPARATE)) == 1
    # The recovery event is dropped (the library's list changes, the handler is not called): the next poll clears it.
    agent.send(f"recover-unseen 4 {SEPARATE} 3")
    time.sleep(0.2)
    assert len(_codes_of(agent.metrics(), chip, SEPARATE)) == 1, "no event came: only a poll may clear it"
    assert agent.wait(lambda s: not _codes_of(s, chip, SEPARATE), timeout=6.0, step=0.1) is not None
    # and a raise the stream never sent is the poll's to find
    agent.send(f"raise-unseen 4 {RESTART} 2")
    assert agent.wait(lambda s: len(_codes_of(s, chip, RESTART)) == 1, timeout=6.0, step=0.1) is not None
    assert agent.metrics().get(_counted(chip, "major", "raised")) is None  # polled, not counted as an event


def test_an_event_during_a_helper_restart_arrives_with_the_new_helper(
        library_agent: Callable[..., LibraryAgent]) -> None:
    agent = library_agent()
    [helper] = agent.helpers()
    helper.kill()
    helper.wait(5)
    agent.send(f"raise 5 {SEPARATE} 3")  # no helper holds the subscription now
    chip = chip_labels(5, CHIPS)
    seen = agent.wait(lambda s: len(_codes_of(s, chip, SEPARATE)) == 1, timeout=15.0, step=0.05)
    assert seen is not None, agent.log_text()[-2000:]
    assert seen.get(_counted(chip, "critical", "raised")) == 1
    assert agent.wait(lambda s: s["npuwatch_dcmi_subscription_up"] == 1, timeout=5.0) is not None
    new = agent.helpers()
    assert len(new) == 1 and new[0].pid != helper.pid


@pytest.mark.parametrize(("variant", "env", "available"), [
    ("no_events", {}, 0.0),  # the symbol is missing
    ("full", {"FAKE_DCMI_FAIL": "dcmi_subscribe_fault_event:-8255"}, 0.0),  # not supported
    ("full", {"FAKE_DCMI_FAIL": "dcmi_subscribe_fault_event:-8005"}, 1.0),  # it failed: the alert's case
])
def test_without_a_subscription_polling_goes_on_and_the_helper_is_not_restarted(
        library_agent: Callable[..., LibraryAgent], variant: str, env: dict[str, str], available: float) -> None:
    agent = library_agent(variant, env=env, config={"collectors": {"npu_smi": {"health_interval": "2s"}}})
    chip = chip_labels(6, CHIPS)
    fake.raise_unseen(agent.events, 6, SEPARATE)  # no event thread to ask: the poll still finds the code
    found = agent.wait(lambda s: len(_codes_of(s, chip, SEPARATE)) == 1, timeout=8.0, step=0.1)
    assert found is not None
    time.sleep(2.0)
    series = agent.metrics()
    assert series["npuwatch_dcmi_subscription_up"] == 0
    assert series["npuwatch_dcmi_subscription_available"] == available
    assert series["npuwatch_dcmi_helper_up"] == 1
    assert series["npuwatch_dcmi_helper_starts_total"] == 1 and series["npuwatch_dcmi_helper_restarts_total"] == 0
    assert not [k for k in series if k.startswith("npuwatch_dcmi_events_total{")]


def test_a_subscribe_call_that_hangs_costs_the_subscription_not_the_readings(
        fake_dcmi: Callable[[str], Path]) -> None:
    client = DcmiClient(str(fake_dcmi("full")), call_timeout=2.0, start_timeout=2.0, backoff=Backoff(base_s=0.1),
                        env={"FAKE_DCMI_HANG": "dcmi_subscribe_fault_event"}, on_event=lambda event: None)
    try:
        with pytest.raises(DcmiWorkerError) as raised:
            client.call("chips")
        assert raised.value.reason == "timeout"
        time.sleep(0.2)
        assert len(client.call("chips")) == 8  # started again without the subscription
        assert client.subscription is not None and client.subscription["reason"] == "error"
        assert "not subscribed again" in client.subscription["message"] and not client.subscribed
        assert client.call("temperature", chip=3) == fake.expected_temperature(3)
        assert client.starts == 2
    finally:
        client.close()


def test_a_read_that_hangs_moves_to_the_tool_while_the_helper_and_its_events_stay_up(
        library_agent: Callable[..., LibraryAgent]) -> None:
    """Issue 41: one DCMI read that hangs (the AI Core clock of ``-t common``, every second here) restarted
    the helper at each deadline, and each restart's gap lost fault events. Now the helper answers for the
    hung call, the call waits out a growing backoff, and the helper, its subscription and the events stay."""
    agent = library_agent(config={"collectors": {"dcmi": {"call_timeout": "2s"},
                                                 "npu_smi": {"usages_interval": "1s"}}},
                          env={"FAKE_DCMI_HANG": "dcmiv2_get_device_frequency"})
    sent = 0
    for round_ in range(16):  # 8 s of reads, one event every half second
        agent.send(f"once {round_ % CHIPS} {RESTART} 1")
        sent += 1
        time.sleep(0.5)

    def all_counted(series: dict[str, float]) -> bool:
        return sum(v for k, v in series.items() if k.startswith("npuwatch_dcmi_events_total{")) == sent

    series = agent.wait(all_counted, timeout=5.0, step=0.1)
    assert series is not None, agent.log_text()[-3000:]
    assert series['npuwatch_dcmi_call_errors_total{kind="timeout"}'] >= 1  # it did hang
    assert series['npuwatch_dcmi_call_errors_total{kind="backoff"}'] >= 1  # and was skipped after
    assert series["npuwatch_dcmi_helper_starts_total"] == 1 and series["npuwatch_dcmi_helper_restarts_total"] == 0
    assert series["npuwatch_dcmi_helper_up"] == 1 and series["npuwatch_dcmi_subscription_up"] == 1
    assert len(agent.helpers()) == 1


def _total(series: dict[str, float]) -> float:
    return sum(v for k, v in series.items() if k.startswith("npuwatch_dcmi_events_total{"))


def _restart_helper(agent: LibraryAgent, while_down: Callable[[], None] = lambda: None) -> None:
    """Kill the helper, run ``while_down`` before a new one can start (the backoff is 1 s), and wait until
    a new helper holds the subscription."""
    [helper] = agent.helpers()
    helper.kill()
    helper.wait(5)
    while_down()
    assert agent.wait(lambda s: s["npuwatch_dcmi_helper_starts_total"] == 2
                      and s["npuwatch_dcmi_subscription_up"] == 1, timeout=15.0, step=0.05) is not None


def test_events_a_library_replays_to_a_new_helper_are_counted_once(
        library_agent: Callable[..., LibraryAgent]) -> None:
    """Issue 41: a library that replays its events to a new subscriber had them counted twice."""
    agent = library_agent(env={"FAKE_DCMI_EVENT_REPLAY": "1"})
    agent.send(f"burst 300 0 {RESTART} 1 2 300")
    assert agent.wait(lambda s: _total(s) == 300, timeout=10.0, step=0.05) is not None
    _restart_helper(agent)
    agent.send(f"once 2 {RESTART} 1")  # after the replay, in the fake's order
    done = agent.wait(lambda s: _total(s) >= 301, timeout=10.0, step=0.05)
    assert done is not None, agent.log_text()[-2000:]
    time.sleep(0.5)
    after = agent.metrics()
    assert _total(after) == 301
    assert after['npuwatch_dcmi_events_dropped_total{reason="duplicate"}'] == 300
    assert after["npuwatch_dcmi_events_missed_total"] == 0


def test_events_raised_while_no_helper_listened_are_counted_as_missed(
        library_agent: Callable[..., LibraryAgent]) -> None:
    """Issue 41: a library that does not replay loses what the driver raised during a restart's gap; the
    agent says how many from the gap in the events' serial numbers."""
    agent = library_agent(env={"FAKE_DCMI_EVENT_LOSE_UNHEARD": "1"})
    agent.send(f"burst 20 0 {RESTART} 1 2 0")
    assert agent.wait(lambda s: _total(s) == 20, timeout=10.0, step=0.05) is not None
    _restart_helper(agent, lambda: agent.send(f"burst 50 0 {RESTART} 1 2 0"))  # raised, never delivered
    agent.send(f"once 3 {RESTART} 1")
    done = agent.wait(lambda s: _total(s) >= 21, timeout=10.0, step=0.05)
    assert done is not None, agent.log_text()[-2000:]
    assert done["npuwatch_dcmi_events_missed_total"] == 50
    assert done['npuwatch_dcmi_events_dropped_total{reason="duplicate"}'] == 0
    assert _total(done) == 21
