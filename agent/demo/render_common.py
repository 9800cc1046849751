"""What every fake tool does around its own rendering: load the state, wait, misbehave on demand.

A fake's ``main`` calls :func:`run_fake` with its tool key (``npu_smi``, ``hccn_tool``,
``ascend_dmi``) and a render function. The node-wide faults ``<tool>_hang|crash|garbage|truncate``
are applied here, so every subcommand of a tool misbehaves the same way.
"""

from __future__ import annotations

import os
import sys
import time

from agent.demo.state import DEMO_DIR_ENV, DemoState, demo_now, load_state

TYPE_CHECKING = False  # see state.py: the fakes avoid importing typing
if TYPE_CHECKING:
    from collections.abc import Callable

__all__ = ["ToolOutput", "kv_line", "run_fake"]

_CRASH_MESSAGES = {
    "npu_smi": "dcmi module initialize failed. ret is -8005\n",
    "hccn_tool": "hccn_tool: dsmi get device info failed, ret(-8005)\n",
    "ascend_dmi": "[ERROR] Failed to initialize the device management interface (dcmi ret -8005).\n",
}


class ToolOutput:
    """What one invocation prints and returns."""

    __slots__ = ("exit_code", "stderr", "stdout")

    def __init__(self, stdout: str, exit_code: int = 0, stderr: str = "") -> None:
        self.stdout = stdout
        self.exit_code = exit_code
        self.stderr = stderr


def kv_line(key: str, value: object, width: int = 30) -> str:
    """One ``npu-smi info -t`` line: TAB, key padded to ``width``, `` : ``, value."""
    return f"\t{key:<{width}} : {value}\n"


def _garbage(now: float) -> str:
    import random

    rng = random.Random(int(now * 1000))
    alphabet = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789|:/+-=.%()[]   \t"
    lines = [
        "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 90))) for _ in range(rng.randint(3, 25))
    ]
    return "\n".join(lines) + "\n"


def _hang_forever() -> None:
    while True:
        time.sleep(3600)


def run_fake(tool: str, argv: list[str], render: Callable[[DemoState, float, list[str]], ToolOutput]) -> int:
    """Render one invocation of ``tool`` against the demo state and return its exit code."""
    directory = os.environ.get(DEMO_DIR_ENV)
    if not directory:
        sys.stderr.write(f"{tool}: {DEMO_DIR_ENV} is not set (not a demo node)\n")
        return 2
    try:
        state = load_state(directory)
    except (OSError, ValueError) as exc:
        sys.stderr.write(f"{tool}: cannot read demo state in {directory}: {exc}\n")
        return 2
    if state.delay_s > 0:
        time.sleep(state.delay_s)
    now = demo_now(state)
    if state.node_fault(f"{tool}_hang") is not None:
        _hang_forever()
    if state.node_fault(f"{tool}_crash") is not None:
        sys.stderr.write(_CRASH_MESSAGES[tool])
        return 1
    output = render(state, now, argv)
    text = output.stdout
    if state.node_fault(f"{tool}_garbage") is not None:
        text = _garbage(now)
    elif state.node_fault(f"{tool}_truncate") is not None:
        text = text[: len(text) // 2]
    sys.stdout.write(text)
    sys.stdout.flush()
    if output.stderr:
        sys.stderr.write(output.stderr)
    return output.exit_code
