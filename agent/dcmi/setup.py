"""Which backend reads the chips: ``collectors.dcmi.enabled`` and the library search, at start.

``false``: npu-smi alone. ``auto`` (the default): DCMI when ``libdcmi.so`` is found and vetted, else
npu-smi alone (one info line says why). ``true``: the same, but a library that cannot be found is a
warning. What the search refused and what it warned about a configured path are logged, one line each.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING

from agent.dcmi.backend import DcmiBackend
from agent.dcmi.client import DcmiClient
from agent.dcmi.locate import locate_library
from collectors.dcmi.library import LibraryNotFound

if TYPE_CHECKING:
    from agent.core.config import Config

__all__ = ["open_backend"]

log = logging.getLogger(__name__)


def open_backend(config: Config, env: Mapping[str, str] | None = None, *,
                 call_timeout: float | None = None) -> DcmiBackend | None:
    """The DCMI backend the config asks for, or None (npu-smi alone). Starts no process: the helper
    starts on the first call. ``call_timeout`` (a one-off command's) bounds each call and the helper's
    start alike; by default each call has ``collectors.dcmi.call_timeout`` and a start at least 10 s."""
    dcmi = config.collectors.dcmi
    if dcmi.enabled is False:
        return None
    try:
        found = locate_library(dcmi.library, allow_writable=dcmi.allow_writable_library)
    except LibraryNotFound as exc:  # its message lists every candidate refused
        level = logging.WARNING if dcmi.enabled is True else logging.INFO
        log.log(level, "DCMI: %s; the chips are read through npu-smi", exc)
        return None
    for line in found.refused:
        log.warning("DCMI: refused %s", line)
    for line in found.warnings:
        log.warning("DCMI: %s", line)
    log.info("DCMI: reading the chips through %s (helper process; npu-smi as fallback and referee)", found.path)
    timeout = float(dcmi.call_timeout) if call_timeout is None else call_timeout
    client = DcmiClient(found.path, call_timeout=timeout, start_timeout=call_timeout, lock_file=dcmi.lock_file,
                        env=env)
    return DcmiBackend(client)
