"""How fast the driver's fault events reach ``/metrics``, and what a burst costs the DCMI helper.

Runs the real agent (``npuwatch run``) on a node with only the fake libdcmi.so
(tests/fixtures/dcmi/fake_dcmi.c; no npu-smi on PATH), asks the fake's event thread for events and
reads ``/metrics`` back:

- latency: ``--rounds`` raises and recoveries of one code, one at a time; each is timed from the
  moment the handler ran in the helper (``npuwatch_dcmi_last_event_timestamp_seconds``; the fake
  stamps ``alarm_raised_time`` the same millisecond) to the end of the first scrape that shows the
  change: the helper's writer, the pipe, the agent's update and a scrape, all in;
- burst: ``--burst`` one-off events spread over one second; the helper's and the agent's CPU time
  from the request to the scrape that counts the last of them (scraped every 0.1 s meanwhile).

    python bench/dcmi_events.py [--chips 16] [--rounds 100] [--burst 1000]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench._util import Table, percentile  # noqa: E402
from tests.support import fake_dcmi  # noqa: E402
from tests.support.dcmi_agent import LibraryAgent, chip_labels  # noqa: E402

CODE = "80818C00"  # SeparateNPU in the default table
LATENCY_TARGET_S = 2.0  # issue 33's held-out check: a raised code and its recovery on /metrics in under 2 s


def _present(series: dict[str, float], chip: str, code: str) -> bool:
    npu = chip.split(",")[1]
    return any(name.startswith("npu_error_code_active{") and npu in name and f'code="{code}"' in name
               for name in series)


def latencies(agent: LibraryAgent, rounds: int) -> list[float]:
    chip = chip_labels(1, agent.chips)
    out = []
    for k in range(rounds):
        raising = k % 2 == 0
        agent.send(f"{'raise' if raising else 'recover'} 1 {CODE} 3")
        deadline = time.time() + 10
        while time.time() < deadline:
            series = agent.metrics()
            if series and _present(series, chip, CODE) == raising:
                out.append(time.time() - series["npuwatch_dcmi_last_event_timestamp_seconds"])
                break
        else:
            raise SystemExit(f"round {k}: the change did not reach /metrics in 10 s")
    return out


def burst(agent: LibraryAgent, count: int) -> tuple[float, float, float]:
    """(wall seconds until counted, helper CPU seconds, agent CPU seconds) for ``count`` one-off events."""
    [helper] = agent.helpers()
    main = psutil.Process(agent.proc.pid)

    def total(series: dict[str, float]) -> float:
        return sum(v for k, v in series.items() if k.startswith("npuwatch_dcmi_events_total{"))

    before = total(agent.metrics())
    helper_cpu, agent_cpu = sum(helper.cpu_times()[:2]), sum(main.cpu_times()[:2])
    started = time.time()
    agent.send(f"burst {count} 0 {CODE} 0 2 1000")
    done = agent.wait(lambda s: total(s) >= before + count, timeout=60, step=0.1)
    wall = time.time() - started
    if done is None:
        raise SystemExit(f"only {total(agent.metrics()) - before} of {count} events counted in 60 s")
    return wall, sum(helper.cpu_times()[:2]) - helper_cpu, sum(main.cpu_times()[:2]) - agent_cpu


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--chips", type=int, default=16)
    parser.add_argument("--rounds", type=int, default=100)
    parser.add_argument("--burst", type=int, default=1000)
    options = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="npuwatch-bench-events-") as scratch:
        work = Path(scratch)
        library = fake_dcmi.build("full", work / "lib")
        agent = LibraryAgent(work / "agent", library, chips=options.chips)
        try:
            agent.ready()
            time.sleep(2.0)  # past the start's collections
            seconds = latencies(agent, options.rounds)
            wall, helper_cpu, agent_cpu = burst(agent, options.burst)
        finally:
            agent.stop()
    p50, p99 = percentile(seconds, 50), percentile(seconds, 99)
    table = Table()
    table.add("event to /metrics, p50", f"{p50 * 1000:.1f} ms", f"< {LATENCY_TARGET_S:.0f} s",
              "yes" if p50 < LATENCY_TARGET_S else "NO")
    table.add("event to /metrics, p99", f"{p99 * 1000:.1f} ms", f"< {LATENCY_TARGET_S:.0f} s",
              "yes" if p99 < LATENCY_TARGET_S else "NO")
    table.add(f"burst of {options.burst} in 1 s: counted after", f"{wall:.2f} s", "-", "-")
    table.add("burst: helper CPU", f"{helper_cpu:.3f} s ({helper_cpu / wall:.0%} of a core)", "-", "-")
    table.add("burst: agent CPU", f"{agent_cpu:.3f} s ({agent_cpu / wall:.0%} of a core)", "-", "-")
    table.note(f"{options.chips} chips, {options.rounds} rounds (raise, recover, ...), one scrape loop; "
               "latency counts from the helper's handler to the end of the scrape showing it")
    print(table.render())
    return 0


if __name__ == "__main__":
    sys.exit(main())
