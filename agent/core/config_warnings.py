"""What a valid config still gets wrong: settings that make a part of the agent silently do nothing.

``npuwatch check-config`` prints each as a warning; the config stays valid (a log directory may only
appear once a job runs), so the exit status is still 0.
"""

from __future__ import annotations

import glob
import os
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from agent.core.config import Config

__all__ = ["config_warnings"]


def config_warnings(config: Config) -> list[str]:
    """One sentence per setting that does nothing on this machine as written."""
    logs = config.collectors.hccl_logs
    if not logs.enabled:
        return []
    found: list[str] = []
    paths = [str(path) for path in logs.paths]
    missing = [path for path in paths if not os.path.exists(os.path.expanduser(path))]
    for path in missing:
        found.append(f"collectors.hccl_logs.paths: {path} does not exist (no HCCL/CANN log is read there)")
    if paths and len(missing) == len(paths) and not any(glob.glob(os.path.expanduser(str(pattern)),
                                                                  recursive=True) for pattern in logs.globs):
        found.append("collectors.hccl_logs: none of its paths exists, so HCCL log monitoring reads nothing "
                     "(the hccl_logs collector shows no_data)")
    if logs.kernel_log is None:
        found.append("collectors.hccl_logs.kernel_log is not set: the kernel log's `Heartbeat lost!` lines are "
                     "not watched (e.g. kernel_log: /var/log/kern.log)")
    elif not os.path.isfile(os.path.expanduser(str(logs.kernel_log))):
        found.append(f"collectors.hccl_logs.kernel_log: {logs.kernel_log} is not a file (the kernel log's "
                     "`Heartbeat lost!` lines are not watched)")
    return found
