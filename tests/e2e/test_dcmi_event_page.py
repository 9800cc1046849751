"""A driver fault event pages in seconds: fake libdcmi.so -> the agent's subscription -> its verdict, judged again
at the event -> the exported finding on /metrics -> a real Prometheus with the shipped alerts/faults.rules.yml
(unscaled: NPUFaultIsolate has no ``for:`` wait) -> a real Alertmanager -> a webhook here. Scrape and evaluation
every second; the agent's health poll and its verdict's own round every 60 s, so only the event can bring the
code in time. A recovery and a second raise within the 10-minute hold send no second page (docs/dcmi.md, "Pages
in seconds")."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from agent.health.verdict_metrics import FAULT_METRIC as FINDING
from tests.support.dcmi_agent import LibraryAgent, chip_labels
from tests.support.paths import REPO
from tests.support.prom_harness import PromProcess, StartAlertmanager, StartPrometheus, WebhookReceiver

CHIPS = 4
HEALTHY = 0  # the fake's logical chip 0 is OK with no error code (others start with codes that page)
SEPARATE = "80818C00"  # SeparateNPU in the default fault table
NODE = "node-event"
PAGE_WITHIN_S = 15.0  # one scrape + one evaluation + Alertmanager, on a loaded 2-core machine; the poll takes 60 s
# The verdict's own round (as often as the chip table is read) every 60 s too: only the judgement the event asks for
# brings the finding in time.
SLOW_ROUNDS = {"collectors": {"npu_smi": {"interval": "60s"}}}


@pytest.fixture
def agent(fake_dcmi: Callable[[str], Path], tmp_path: Path) -> Iterator[LibraryAgent]:
    running = LibraryAgent(tmp_path / "agent", fake_dcmi("full"), config=SLOW_ROUNDS, chips=CHIPS)
    try:
        running.ready()
        yield running
    finally:
        running.stop()


def _pages(webhook: WebhookReceiver, status: str, npu: str) -> list[float]:
    return [a.received_at for a in webhook.alerts(status)
            if a.name == "NPUFaultIsolate" and a.labels.get("npu") == npu]


def test_a_separate_npu_event_pages_within_seconds_and_a_flap_pages_once(
        agent: LibraryAgent, prometheus: StartPrometheus, alertmanager: StartAlertmanager,
        webhook: WebhookReceiver) -> None:
    am = alertmanager(webhook_url=webhook.url)
    target = f"127.0.0.1:{agent.port}"
    prom: PromProcess = prometheus([target], [REPO / "alerts" / "faults.rules.yml"], alertmanager_url=am.url,
                                   target_labels={target: {"node": NODE}})
    prom.wait_for('npu_chips{job="npuwatch"}', timeout=30)
    prom.wait_rules_evaluated_after(time.time())
    npu = chip_labels(HEALTHY, CHIPS).split('npu="')[1].rstrip('"')
    assert not [a for a in prom.alerts() if a["labels"]["alertname"] == "NPUFaultIsolate"
                and a["labels"]["npu"] == npu], "paged while healthy"

    sent = agent.send(f"raise {HEALTHY} {SEPARATE} 3")
    page = webhook.wait_for("NPUFaultIsolate", timeout=60, node=NODE, npu=npu, kind="chip_fault_isolate")
    assert page is not None, f"no page in 60 s: {prom.log_tail()}"
    took = page.received_at - sent
    print(f"DCMI event -> NPUFaultIsolate at the webhook: {took:.1f} s")
    assert took < PAGE_WITHIN_S, f"the page took {took:.1f} s after the event"
    assert SEPARATE in page.annotations["description"]

    agent.send(f"recover {HEALTHY} {SEPARATE} 3")
    assert agent.wait(lambda s: not [k for k in s if f'code="{SEPARATE}"' in k and f'npu="{npu}"' in k],
                      timeout=5) is not None
    prom.wait_for(f'absent({FINDING}{{npu="{npu}", kind="chip_fault_isolate"}})', timeout=20)
    agent.send(f"raise {HEALTHY} {SEPARATE} 3")
    prom.wait_for(f'{FINDING}{{npu="{npu}", kind="chip_fault_isolate"}}', timeout=20)
    prom.wait_rules_evaluated_after(time.time())
    time.sleep(3)  # a few evaluations and Alertmanager's 1 s group interval for a second page to show
    assert len(_pages(webhook, "firing", npu)) == 1, "the flap paged twice"
    assert _pages(webhook, "resolved", npu) == [], "the hold let the page resolve during the flap"
