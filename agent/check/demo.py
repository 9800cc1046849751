"""``npuwatch check --demo``: point the tools, logs and probes at a demo node, as the agent's demo does.

The demo node also gets what a real node has and the demo agent does not need: an ``hccn.conf``
that matches the fake ports' addresses (edit ``DIR/hccn.conf`` to try ``roce_ip``), and, when the
config leaves ``expected_chips`` at 0, the node's own chip count. ``sustained_gemm`` tolerates a
0.9 drop between windows (fail and warn) (a shared CPU is not a throttling chip).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

__all__ = ["demo_setup", "write_hccn_conf"]


def write_hccn_conf(path: Path, addresses: dict[int, str]) -> None:
    lines = ["# hccn.conf of the npuwatch demo node (edit an address to make roce_ip fail)"]
    for device, address in sorted(addresses.items()):
        lines += [f"address_{device}={address}", f"netmask_{device}=255.255.0.0"]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def demo_setup(config: Any, demo_dir: Path, chips: int) -> tuple[Any, dict[str, str]]:
    """(config for the demo node at ``demo_dir``, its tool environment); the node is created when absent."""
    from agent.core.config import apply_overrides
    from agent.demo.node import DemoNode, demo_overrides
    from agent.demo.render_model import device_ip

    demo = DemoNode(demo_dir).open(chips=chips)  # an existing node keeps its faults and counters
    for sub in ("log", "state"):
        (demo_dir / sub).mkdir(parents=True, exist_ok=True)
    state = demo.read()
    conf = demo_dir / "hccn.conf"
    if not conf.exists():
        write_hccn_conf(conf, {chip: device_ip(state, chip) for chip in range(state.chips)})
    overrides = demo_overrides(demo_dir, demo.bin_dir, config)
    overrides["collectors.hccn_tool.hccn_conf"] = str(conf)
    if not config.expected_chips:
        overrides["expected_chips"] = state.chips
    # The demo's probes run on a shared CPU whose speed swings with the other processes' load: a slow
    # window there is not throttling. The demo's sustained_gemm fails on heat (`hot`) and wrong products.
    overrides["check.max_throttle_drop"] = max(float(config.check.max_throttle_drop), 0.9)
    overrides["check.warn_throttle_drop"] = max(float(config.check.warn_throttle_drop), 0.9)
    return apply_overrides(config, overrides), demo.env()
