"""The fail-slow sampling end to end (docs/failslow.md#signals): ``npuwatch run`` with the fake libdcmi.so and
``collectors.dcmi.failslow_interval`` at 5 s (the busy fraction read 5 times in it: ``failslow_reads``, and the
mean of the last 5 s exported) exports each chip's AI Core busy fraction, in the mean within about 6 s of the chip
reporting a new one and alone within 10 s, on /metrics and on /metrics/failslow, while the table that also reads
it runs once a minute; /metrics/failslow holds the fail-slow series alone."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from agent.core.exporter import FAILSLOW_FAMILIES
from tests.support import fake_dcmi as fake
from tests.support.agent_harness import get
from tests.support.dcmi_agent import LibraryAgent, chip_labels, parse_metrics

CHIPS = 4
INTERVAL_S = 5.0
READ_S = INTERVAL_S / 5  # failslow_reads: 5 by default
SLACK_S = 2.5  # the scheduler's thread, the scrape loop and a loaded 2-core machine
LOGIC = 1  # the chip watched

FakeLibrary = Callable[[str], Path]


@pytest.fixture
def running(fake_dcmi: FakeLibrary, tmp_path: Path) -> Iterator[tuple[LibraryAgent, Path]]:
    offset = tmp_path / "utilization-offset"
    offset.write_text("0")
    agent = LibraryAgent(tmp_path, fake_dcmi("full"), chips=CHIPS, env={"FAKE_DCMI_UTIL_FILE": str(offset)},
                         config={"collectors": {"npu_smi": {"interval": "60s", "usages_interval": "60s"},
                                                "dcmi": {"failslow_interval": f"{INTERVAL_S:g}s"}}})
    try:
        # the chips are listed once the table has run (once a minute here): npu_fast reads them from then on
        assert agent.wait(lambda s: s.get('npuwatch_collector_up{collector="npu_fast"}') == 1, timeout=90,
                          step=0.2) is not None, agent.log_text()[-3000:]
        yield agent, offset
    finally:
        agent.stop()


def _utilization(agent: LibraryAgent, path: str) -> float | None:
    status, body, _ = get(agent.url + path, timeout=5)
    assert status == 200
    return parse_metrics(body.decode()).get(f"npu_aicore_utilization_ratio{{{chip_labels(LOGIC, CHIPS)}}}")


def test_a_new_busy_fraction_is_exported_within_the_failslow_interval(running: tuple[LibraryAgent, Path]) -> None:
    agent, offset = running
    assert _utilization(agent, "/metrics") == fake.expected_utilization(LOGIC, 2) / 100
    for step in (10, 20, 30):
        before = _utilization(agent, "/metrics/failslow")
        offset.write_text(str(step))
        changed = time.monotonic()
        want = fake.expected_utilization(LOGIC, 2, step) / 100
        # the next export holds the first new reading (a second later), in the mean of the interval's readings
        while _utilization(agent, "/metrics/failslow") == before:
            assert time.monotonic() - changed < INTERVAL_S + READ_S + SLACK_S, (step, agent.log_text()[-2000:])
            time.sleep(0.05)
        moved = _utilization(agent, "/metrics/failslow")
        assert moved is not None and before is not None and min(before, want) <= moved <= max(before, want)
        # and the export after the last old reading left the interval is the new reading alone
        while _utilization(agent, "/metrics/failslow") != want:
            assert time.monotonic() - changed < 2 * INTERVAL_S + SLACK_S, (step, agent.log_text()[-2000:])
            time.sleep(0.05)
        assert _utilization(agent, "/metrics") == want  # the same series on both endpoints
    assert "exported by two sources" not in agent.log_text()


def test_the_failslow_endpoint_holds_the_failslow_series_alone(running: tuple[LibraryAgent, Path]) -> None:
    agent, _ = running
    status, body, _ = get(agent.url + "/metrics/failslow", timeout=5)
    text = body.decode()
    families = {line.split()[2] for line in text.splitlines() if line.startswith("# TYPE ")}
    assert status == 200 and families and families <= FAILSLOW_FAMILIES, families
    assert {"npu_aicore_utilization_ratio", "npu_aicore_frequency_hertz"} <= families
    series = agent.metrics()
    assert series['npuwatch_collector_up{collector="npu_fast"}'] == 1
    assert series['npuwatch_collector_interval_seconds{collector="npu_fast"}'] == INTERVAL_S
    assert len(body) < len(get(agent.url + "/metrics", timeout=5)[1]) / 5
