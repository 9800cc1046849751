"""An agent in the calling process for ``npuwatch top`` when no agent answers on this node: it reads the tools
itself and judges each round as the agent does (check's quick level over its own readings), serving no port.

It touches nothing of the node's agent: its state (fault history, log offsets) lives in a temporary directory
removed at the end, and it writes no textfile, starts no DCMI helper (the tools serve) and runs no probe and no
ascend-dmi (they load the chips)."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Callable
from typing import TYPE_CHECKING

from agent.core.config import apply_overrides

if TYPE_CHECKING:
    from agent.core.config import Config

__all__ = ["OVERRIDES", "standalone_agent"]

OVERRIDES = {
    "textfile.enabled": False,
    "collectors.dcmi.enabled": False,
    "collectors.ascend_dmi.enabled": False,
    "probes.enabled": False,
}


def standalone_agent(config: Config) -> tuple[Callable[[], bytes], Callable[[], None]]:
    """(its exposition, now; stop it and remove its state), after its first collection round."""
    from agent.daemon.assemble import build_agent

    state = tempfile.mkdtemp(prefix="npuwatch-top-")
    try:
        agent = build_agent(apply_overrides(config, {**OVERRIDES, "state_dir": state})).agent
        agent.collect_once()
        agent.start(serve_http=False)
    except BaseException:
        shutil.rmtree(state, ignore_errors=True)
        raise

    def stop() -> None:
        agent.stop()
        shutil.rmtree(state, ignore_errors=True)

    return (lambda: agent.cache.render().body), stop
