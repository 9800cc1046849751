"""Simulated Ascend node: fake ``npu-smi``, ``hccn_tool`` and ``ascend-dmi`` with switchable faults.

Used by ``npuwatch run --demo`` and by the test suite. Standard library only. The fake tools import
this package on every call, so the public names are loaded lazily (``DemoNode`` pulls in argparse).
"""

from __future__ import annotations

import importlib

__all__ = [
    "ALERT_FAULTS",
    "CHIP_FAULTS",
    "DEMO_DIR_ENV",
    "DEMO_TIME_ENV",
    "LOG_FAULTS",
    "NODE_FAULTS",
    "DemoNode",
    "DemoState",
    "start_demo",
]

_HOMES = {
    "DemoNode": "agent.demo.node",
    "start_demo": "agent.demo.node",
    "ALERT_FAULTS": "agent.demo.faults",
    "CHIP_FAULTS": "agent.demo.faults",
    "LOG_FAULTS": "agent.demo.faults",
    "DEMO_DIR_ENV": "agent.demo.state",
    "DEMO_TIME_ENV": "agent.demo.state",
    "NODE_FAULTS": "agent.demo.faults",
    "DemoState": "agent.demo.state",
}


def __getattr__(name: str) -> object:
    if name not in _HOMES:
        raise AttributeError(f"module 'agent.demo' has no attribute {name!r}")
    return getattr(importlib.import_module(_HOMES[name]), name)
