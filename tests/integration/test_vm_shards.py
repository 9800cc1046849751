"""The VictoriaMetrics layout's shard label, as vmagent itself assigns it: the scrape job of
``layouts.scrape_config(shards=N)`` labels every target with ``shard`` (hashmod over the address), and
tests/support/vm_hashmod.py (which the end-to-end tests use to place a node on a shard before it is scraped)
computes the same shard for short and long addresses."""

from __future__ import annotations

import importlib.util
import json
import sys
import time
import urllib.request
from pathlib import Path

from tests.support.paths import REPO
from tests.support.prom_harness import start_vmagent
from tests.support.vm_hashmod import vmagent_shard

_SPEC = importlib.util.spec_from_file_location("npuwatch_layouts", REPO / "deploy" / "prometheus" / "layouts.py")
assert _SPEC is not None and _SPEC.loader is not None
layouts = importlib.util.module_from_spec(_SPEC)
sys.modules["npuwatch_layouts"] = layouts
_SPEC.loader.exec_module(layouts)

ADDRESSES = [f"127.0.0.1:{port}" for port in range(1001, 1013)] + [
    f"npu-node-{index:04d}.rack-{index % 7:02d}.cluster.example.internal:9611" for index in range(12)]


def test_vmagent_labels_each_target_with_the_shard_the_layout_expects(tmp_path: Path) -> None:
    targets = {address: {"node": f"n{index}"} for index, address in enumerate(ADDRESSES)}
    config = layouts.scrape_config(static_targets=targets, scrape_interval="1h", shards=3)
    vmagent = start_vmagent(tmp_path, config, remote_write_url="http://127.0.0.1:9/api/v1/write")
    try:
        deadline = time.monotonic() + 30
        while True:
            with urllib.request.urlopen(vmagent.url + "/api/v1/targets", timeout=10) as response:
                active = json.load(response)["data"]["activeTargets"]
            if len(active) == len(ADDRESSES) or time.monotonic() > deadline:
                break
            time.sleep(0.5)
        placed = {target["labels"]["instance"]: target["labels"].get("shard") for target in active}
    finally:
        vmagent.stop()
    assert placed == {address: str(vmagent_shard(address, 3)) for address in ADDRESSES}
    assert set(placed.values()) == {"0", "1", "2"}
