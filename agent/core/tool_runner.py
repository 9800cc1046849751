"""The one place that runs external tools (npu-smi, hccn_tool, ascend-dmi).

Every call: argv list (never a shell), ``LANG=C``, a hard timeout, the whole
process group killed on timeout, bounded capture of stdout/stderr, and the
child always reaped so no zombie is left behind.
"""

from __future__ import annotations

import contextlib
import os
import selectors
import shutil
import signal
import subprocess
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "DEFAULT_MAX_OUTPUT_BYTES",
    "STANDARD_TOOL_DIRS",
    "RunResult",
    "ToolFailed",
    "ToolMissing",
    "ToolTimeout",
    "resolve_tool",
    "run_tool",
]

DEFAULT_MAX_OUTPUT_BYTES = 4 << 20
_READ_CHUNK = 65536
_REAP_GRACE_S = 2.0

# Where Ascend installs its tools when they are not on PATH (driver and toolbox packages).
STANDARD_TOOL_DIRS: tuple[str, ...] = (
    "/usr/local/sbin",
    "/usr/local/bin",
    "/usr/local/Ascend/driver/tools",
    "/usr/local/Ascend/toolbox/latest/Ascend-DMI/bin",
    "/usr/local/Ascend/toolbox/latest/bin",
)


class ToolMissing(Exception):
    """The tool is not installed (not at the configured path, not on PATH, not in the Ascend dirs)."""

    def __init__(self, name: str, searched: Sequence[str]) -> None:
        super().__init__(f"{name}: not found (looked in: {', '.join(searched)})")
        self.name = name
        self.searched = tuple(searched)


class ToolTimeout(Exception):
    """The tool ran past its timeout; its process group was killed."""

    def __init__(self, argv: Sequence[str], timeout_s: float, partial_stdout: str) -> None:
        super().__init__(f"{argv[0]}: no answer within {timeout_s:g}s (killed)")
        self.argv = tuple(argv)
        self.timeout_s = timeout_s
        self.partial_stdout = partial_stdout


class ToolFailed(Exception):
    """The tool exited non-zero."""

    def __init__(self, result: RunResult) -> None:
        tail = (result.stderr or result.stdout).strip().splitlines()[-3:]
        super().__init__(
            f"{Path(result.argv[0]).name} exited {result.returncode}: {' / '.join(tail) or 'no output'}"
        )
        self.result = result


@dataclass(frozen=True, slots=True)
class RunResult:
    argv: tuple[str, ...]
    returncode: int
    stdout: str
    stderr: str
    duration_s: float
    truncated: bool


def resolve_tool(
    name: str,
    configured: str | None = None,
    search_dirs: Iterable[str] = STANDARD_TOOL_DIRS,
    path_env: str | None = None,
) -> str:
    """Find ``name``: the configured path first, then PATH, then the standard Ascend locations."""
    searched: list[str] = []
    if configured:
        searched.append(configured)
        if os.path.isfile(configured) and os.access(configured, os.X_OK):
            return configured
        raise ToolMissing(name, searched)
    found = shutil.which(name, path=path_env if path_env is not None else os.environ.get("PATH"))
    searched.append("PATH")
    if found:
        return found
    for directory in search_dirs:
        candidate = os.path.join(directory, name)
        searched.append(directory)
        if os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            return candidate
    raise ToolMissing(name, searched)


def _tool_env(extra: Mapping[str, str] | None) -> dict[str, str]:
    env = dict(os.environ)
    env["LANG"] = "C"
    env["LC_ALL"] = "C"
    if extra:
        env.update(extra)
    return env


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)


def run_tool(
    argv: Sequence[str],
    timeout_s: float,
    *,
    max_output_bytes: int = DEFAULT_MAX_OUTPUT_BYTES,
    env: Mapping[str, str] | None = None,
    check: bool = True,
) -> RunResult:
    """Run ``argv`` and return its output.

    Raises ``ToolTimeout`` (group killed and reaped) or, with ``check``, ``ToolFailed``
    on a non-zero exit. Output past ``max_output_bytes`` per stream is dropped and
    ``truncated`` is set. A missing executable raises ``ToolMissing``.
    """
    if not argv:
        raise ValueError("empty argv")
    started = time.monotonic()
    try:
        proc = subprocess.Popen(
            list(argv),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=_tool_env(env),
            start_new_session=True,
            close_fds=True,
        )
    except FileNotFoundError as exc:
        raise ToolMissing(argv[0], [argv[0]]) from exc
    except PermissionError as exc:
        raise ToolMissing(argv[0], [f"{argv[0]} (not executable)"]) from exc

    chunks: dict[int, list[bytes]] = {1: [], 2: []}
    sizes = {1: 0, 2: 0}
    truncated = False
    deadline = started + timeout_s
    timed_out = False
    assert proc.stdout is not None and proc.stderr is not None
    with selectors.DefaultSelector() as selector:
        selector.register(proc.stdout, selectors.EVENT_READ, 1)
        selector.register(proc.stderr, selectors.EVENT_READ, 2)
        try:
            while selector.get_map():
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    timed_out = True
                    break
                for key, _ in selector.select(timeout=remaining):
                    data = os.read(key.fd, _READ_CHUNK)
                    stream = key.data
                    if not data:
                        selector.unregister(key.fileobj)
                        continue
                    room = max_output_bytes - sizes[stream]
                    if room <= 0:
                        truncated = True
                        continue
                    if len(data) > room:
                        data = data[:room]
                        truncated = True
                    chunks[stream].append(data)
                    sizes[stream] += len(data)
            if not timed_out:
                remaining = max(0.0, deadline - time.monotonic())
                try:
                    proc.wait(timeout=remaining)
                except subprocess.TimeoutExpired:
                    timed_out = True
        finally:
            if timed_out or proc.returncode is None:
                _kill_group(proc)
            # A child stuck in uninterruptible sleep (a wedged driver call) keeps its pending
            # SIGKILL until the call returns; nothing more can be done here.
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=_REAP_GRACE_S)
            # A grandchild may outlive the leader and keep the pipes open: the group kill above
            # covers the timeout case; on a normal exit close our ends regardless.
            proc.stdout.close()
            proc.stderr.close()
    stdout = b"".join(chunks[1]).decode("utf-8", errors="replace")
    if timed_out:
        raise ToolTimeout(argv, timeout_s, stdout)
    result = RunResult(
        argv=tuple(argv),
        returncode=proc.returncode if proc.returncode is not None else -1,
        stdout=stdout,
        stderr=b"".join(chunks[2]).decode("utf-8", errors="replace"),
        duration_s=time.monotonic() - started,
        truncated=truncated,
    )
    if check and result.returncode != 0:
        raise ToolFailed(result)
    return result
