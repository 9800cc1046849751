"""``npuwatch check --demo``: the demo node's config (agent.demo.node.open_demo), plus what checks need.

The demo node has an ``hccn.conf`` that matches the fake ports' addresses (edit ``DIR/hccn.conf`` to
try ``roce_ip``). Here, when the config leaves ``expected_chips`` at 0, the node's own chip count is
expected, and ``sustained_gemm`` tolerates a 0.9 drop between windows (fail and warn) (a shared CPU
is not a throttling chip).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from agent.core.config import Config

__all__ = ["demo_setup"]


def demo_setup(config: Config, demo_dir: Path, chips: int) -> tuple[Config, dict[str, str]]:
    """(config for the demo node at ``demo_dir``, its tool environment); the node is created when absent."""
    from agent.core.config import apply_overrides
    from agent.demo.node import DemoNode, open_demo

    overrides, tool_env = open_demo(config, demo_dir, chips)
    if not config.expected_chips:
        overrides["expected_chips"] = DemoNode(demo_dir).read().chips
    # The demo's probes run on a shared CPU whose speed swings with the other processes' load: a slow
    # window there is not throttling. The demo's sustained_gemm fails on heat (`hot`) and wrong products.
    overrides["check.max_throttle_drop"] = max(float(config.check.max_throttle_drop), 0.9)
    overrides["check.warn_throttle_drop"] = max(float(config.check.warn_throttle_drop), 0.9)
    return apply_overrides(config, overrides), tool_env
