"""`/metrics` latency of npuwatch (16-chip demo) against node_exporter, in the same run.

    python bench/metrics_latency.py                  # 2,000 sequential scrapes of each
    python bench/metrics_latency.py --requests 500
    python bench/metrics_latency.py --quick          # what tests/integration/test_bench_smoke.py runs

Each exporter runs in its own process on 127.0.0.1; the same client scrapes them in turn: one
new connection per request (``Connection: close``), plain text, no gzip unless ``--gzip``.
npuwatch runs twice (``python -m bench._util serve``: the agent's scheduler at default intervals
with the demo fakes rendered in-process, per-IP rate limit lifted): once serving its cached
exposition, and once re-rendering on every scrape. The second is what a Prometheus scraping every
15 s mostly gets, because some collector has stored a new snapshot since the previous scrape.
node_exporter (Debian's prometheus-node-exporter) is started with its default collectors and
killed at the end. When it is missing, npuwatch's numbers are printed alone (exit code 0).

Target: npuwatch p50 <= node_exporter p50.
"""

from __future__ import annotations

import argparse
import gzip
import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench._util import (
    Scrape,
    Table,
    count_series,
    free_port,
    ms,
    percentile,
    scrape,
    start_server_process,
    stop_process,
    verdict,
    wait_until,
)

NODE_EXPORTER_CANDIDATES = ("/usr/bin/prometheus-node-exporter", "prometheus-node-exporter", "node_exporter")


@dataclass
class Target:
    name: str
    port: int
    timings: list[float]
    failures: int = 0
    body: bytes = b""

    def record(self, result: Scrape, gzipped: bool) -> None:
        self.timings.append(result.seconds)
        if result.status != 200:
            self.failures += 1
        else:
            compressed = gzipped and result.body[:2] == b"\x1f\x8b"
            self.body = gzip.decompress(result.body) if compressed else result.body


def find_node_exporter(explicit: str | None) -> str | None:
    for candidate in (explicit,) if explicit else NODE_EXPORTER_CANDIDATES:
        found = candidate if os.path.isfile(candidate) else shutil.which(candidate)
        if found and os.access(found, os.X_OK):
            return found
    return None


def start_node_exporter(binary: str, log_path: Path) -> tuple[subprocess.Popen[bytes], int]:
    port = free_port()
    with open(log_path, "wb") as log:
        proc = subprocess.Popen([binary, f"--web.listen-address=127.0.0.1:{port}"],
                                stdin=subprocess.DEVNULL, stdout=log, stderr=log)

    def up() -> bool:
        if proc.poll() is not None:
            return True
        try:
            return scrape(port, timeout_s=2).status == 200
        except OSError:
            return False

    wait_until(up, 20, 0.05)
    if proc.poll() is not None:
        tail = log_path.read_text(errors="replace")[-500:]
        raise RuntimeError(f"node_exporter exited {proc.returncode}: {tail}")
    return proc, port


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=2000, help="scrapes of each exporter")
    parser.add_argument("--chips", type=int, default=16)
    parser.add_argument("--gzip", action="store_true", help="send Accept-Encoding: gzip, as Prometheus does")
    parser.add_argument("--node-exporter", metavar="PATH", help="node_exporter binary (default: search)")
    parser.add_argument("--quick", action="store_true", help="tiny sizes, for the smoke test")
    args = parser.parse_args(argv)
    if args.quick:
        args.requests = 50
    warmup = max(2, args.requests // 100)

    table = Table()
    processes: list[subprocess.Popen[bytes]] = []
    with tempfile.TemporaryDirectory(prefix="npuwatch-bench-") as tmp:
        work = Path(tmp)
        try:
            targets: list[Target] = []
            for label, name in (("cached", "cached"), ("render per scrape, typical", "typical"),
                                ("render per scrape, every source changed", "all")):
                proc, port = start_server_process(work / f"demo-{name}", args.chips,
                                                  work / f"npuwatch-{name}.log", render=name)
                processes.append(proc)
                targets.append(Target(f"npuwatch {args.chips} chips, {label}", port, []))
            binary = find_node_exporter(args.node_exporter)
            if binary is None:
                table.note("node_exporter not found (apt-get install prometheus-node-exporter); "
                           "npuwatch only")
            else:
                node_proc, node_port = start_node_exporter(binary, work / "node_exporter.log")
                processes.append(node_proc)
                targets.append(Target("node_exporter", node_port, []))
            for _ in range(warmup):
                for target in targets:
                    scrape(target.port, gzip=args.gzip)
            for _ in range(args.requests):  # alternate, so both see the same background load
                for target in targets:
                    target.record(scrape(target.port, gzip=args.gzip), args.gzip)
        finally:
            for proc in processes:
                stop_process(proc)

    for target in targets:
        table.add(f"{target.name} p50", ms(percentile(target.timings, 50)), "-", "-")
        table.add(f"{target.name} p99", ms(percentile(target.timings, 99)), "-", "-")
        table.add(f"{target.name} bytes", len(target.body), "-", "-")
        table.add(f"{target.name} series", count_series(target.body), "-", "-")
        if target.failures:
            table.note(f"{target.name}: {target.failures} of {len(target.timings)} scrapes "
                       "did not answer 200")
    if targets[-1].name == "node_exporter":
        theirs = percentile(targets[-1].timings, 50)
        for target in targets[:-1]:
            ours = percentile(target.timings, 50)
            table.add(f"p50 ratio: {target.name} / node_exporter", f"{ours / theirs:.2f}", "<= 1.00",
                      verdict(ours <= theirs))
    table.note(f"{args.requests} sequential scrapes each, new connection per scrape, "
               f"{'gzip' if args.gzip else 'no gzip'}")
    table.note("'cached': the exposition is rendered when the store changes (scheduler at default "
               "intervals, fakes in-process); 'render per scrape, typical': before every scrape the "
               "sources with an interval <= 15 s (npu-smi info, host, logs, probes) store new samples, "
               "as they have by the next scrape at a 15 s interval; 'every source changed': all do "
               "(the worst case). Both render-per-scrape rows render the changed sources inside the "
               "request; the running agent renders a source in its collector thread when it stores, "
               "so what a scraper of the real agent sees is the 'cached' row")
    print(table.render())
    return 0


if __name__ == "__main__":
    sys.exit(main())
