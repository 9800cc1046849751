"""The one place that runs external tools (npu-smi, hccn_tool, ascend-dmi).

Every call: argv list (never a shell), ``LANG=C``, a hard timeout, bounded capture of
stdout/stderr, and the child always reaped so no zombie is left behind.

What "kill the tool" means: its process group, every descendant still in its process tree,
and every process that carries the run's id in its environment (``NPUWATCH_TOOL_RUN``), which
finds a grandchild that called ``setsid`` and whose parent already exited (re-parented to init, it
is in no tree and no group of ours). The tool is done when the direct child has exited: output
still arriving after a short drain is not waited for, so a grandchild that keeps stdout open cannot
turn a good result into a timeout; leftovers are killed. ``kill_running_tools`` ends every tool
still running, for a shutdown that must not wait out a hung tool's timeout.

A tool that prints more than the cap on either stream is broken (these tools print kilobytes): it
is killed at once rather than read and discarded to the end, and with ``check`` that is a
``ToolOutputTooLarge``, so no caller parses a cut-off table as if it were whole.
"""

from __future__ import annotations

import contextlib
import errno
import itertools
import os
import secrets
import selectors
import shutil
import signal
import subprocess
import threading
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import psutil

__all__ = [
    "DEFAULT_MAX_OUTPUT_BYTES",
    "STANDARD_TOOL_DIRS",
    "RunResult",
    "ToolCannotRun",
    "ToolFailed",
    "ToolMissing",
    "ToolOutputTooLarge",
    "ToolTimeout",
    "kill_running_tools",
    "resolve_tool",
    "run_tool",
    "why_cannot_run",
]

DEFAULT_MAX_OUTPUT_BYTES = 1 << 20  # the largest real answers (npu-smi info, 16 dies, busy) are tens of KiB
_READ_CHUNK = 65536
_REAP_GRACE_S = 2.0
_DRAIN_AFTER_EXIT_S = 0.2  # output still buffered when the direct child exits
RUN_ID_ENV = "NPUWATCH_TOOL_RUN"
_RUN_ID_KEY = RUN_ID_ENV.encode()
_run_ids = itertools.count()
_RUN_TOKEN = secrets.token_hex(4)  # with the pid and the count: no other agent's run has this id
_running: dict[str, subprocess.Popen[bytes]] = {}  # run_id -> direct child, while it runs
_running_lock = threading.Lock()

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


class ToolCannotRun(ToolMissing):
    """The tool is there but exec refuses it: not executable, or its interpreter or loader is missing
    (a broken wrapper, a half-finished driver upgrade, a deleted venv). Counted as a missing tool."""

    def __init__(self, path: str, why: str) -> None:
        Exception.__init__(self, f"{path}: exists but cannot be executed ({why})")
        self.name = path
        self.searched = (path,)


def why_cannot_run(path: str) -> str | None:
    """Why exec of an existing ``path`` fails, or None when there is no such file.

    exec reports a missing ``#!`` interpreter (or ELF loader) as ENOENT, the same as a missing
    file, so the file's first bytes tell which it was."""
    if not os.path.lexists(path):
        return None
    if os.path.isdir(path):
        return "it is a directory"
    if not os.access(path, os.X_OK):
        return "not executable: chmod +x it, or set the path of the real tool"
    try:
        with open(path, "rb") as handle:
            head = handle.read(256)
    except OSError as exc:
        return f"unreadable: {exc.strerror or exc}"
    if head.startswith(b"#!"):
        words = head[2:].split(b"\n", 1)[0].split()
        interpreter = os.fsdecode(words[0]) if words else ""
        if not interpreter:
            return "its #! line names no interpreter"
        if not os.path.exists(interpreter):
            return f"its interpreter {interpreter} is missing"
        if not os.access(interpreter, os.X_OK):
            return f"its interpreter {interpreter} is not executable"
        return f"its interpreter {interpreter} cannot be run"
    if head.startswith(b"\x7fELF"):
        return "its ELF program loader is missing: built for another architecture or C library?"
    return "not a program this machine can run"


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


class ToolOutputTooLarge(ToolFailed):
    """The tool printed more than the output cap on a stream; it was killed and its output is partial."""

    def __init__(self, result: RunResult, max_output_bytes: int) -> None:
        Exception.__init__(self, f"{Path(result.argv[0]).name}: more than {max_output_bytes} bytes of output "
                                 "on one stream (killed; output not used)")
        self.result = result


@dataclass(frozen=True)
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
        why = why_cannot_run(configured)
        raise ToolCannotRun(configured, why) if why else ToolMissing(name, searched)
    found = shutil.which(name, path=path_env)  # None: the process's PATH
    searched.append("PATH")
    if found:
        return found
    for directory in search_dirs:
        candidate = os.path.join(directory, name)
        searched.append(directory)
        if os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            return candidate
    raise ToolMissing(name, searched)


def _environ_now() -> dict[bytes, bytes] | None:
    """The process environment as os.environ holds it (bytes on POSIX), without decoding each entry."""
    data = getattr(os.environ, "_data", None)
    if isinstance(data, dict) and all(isinstance(key, bytes) for key in itertools.islice(data, 1)):
        return data
    return None


# [(os.environ's entries when built, the extra env's items, the encoded environment without the run id)]
_EnvEntry = tuple[dict[bytes, bytes], tuple[tuple[str, str], ...], dict[bytes, bytes]]
_env_cache: list[_EnvEntry] = []


def _tool_env(extra: Mapping[str, str] | None, run_id: str) -> dict[bytes, bytes]:
    """The tool's environment, encoded: the agent's, ``LANG``/``LC_ALL`` C, ``extra``, then the run id.

    Built once and reused while os.environ and ``extra`` stay the same (compared on every call, in C):
    decoding and encoding every variable of the agent's environment for each of the fail-slow sampling's
    ~200 runs a minute was a tenth of a run's cost."""
    items = tuple(extra.items()) if extra else ()
    environ = _environ_now()
    cached = _env_cache[0] if _env_cache else None
    if environ is not None and cached is not None and cached[1] == items and cached[0] == environ:
        env = dict(cached[2])
    else:
        built = dict(environ) if environ is not None else {
            os.fsencode(key): os.fsencode(value) for key, value in os.environ.items()}
        built[b"LANG"] = b"C"
        built[b"LC_ALL"] = b"C"
        built.update((os.fsencode(key), os.fsencode(value)) for key, value in items)
        if environ is not None:
            _env_cache[:] = [(dict(environ), items, built)]
        env = dict(built)
    env[_RUN_ID_KEY] = os.fsencode(run_id)
    return env


def _carries_run_id(process: psutil.Process, run_id: str) -> bool:
    if not run_id:  # no id would match every process that has none: never a victim list
        return False
    try:
        return process.environ().get(RUN_ID_ENV) == run_id
    except (psutil.Error, OSError):
        return False


def kill_tree(proc: subprocess.Popen[bytes], run_id: str) -> int:
    """SIGKILL the tool's group, its remaining descendants and any process carrying its run_id."""
    victims: dict[int, psutil.Process] = {}
    with contextlib.suppress(psutil.Error):
        for child in psutil.Process(proc.pid).children(recursive=True):
            victims[child.pid] = child
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    if proc.returncode is None:
        with contextlib.suppress(ProcessLookupError):
            proc.kill()
    # Escaped descendants: their own session, their parent gone. The run_id is inherited through
    # fork/exec unless a process scrubs its environment, which a vendor tool has no reason to do.
    for process in psutil.process_iter():
        if process.pid not in victims and process.pid != proc.pid and _carries_run_id(process, run_id):
            victims[process.pid] = process
    for victim in victims.values():
        with contextlib.suppress(psutil.Error):
            victim.kill()
    return len(victims)


def kill_running_tools() -> int:
    """Kill every tool process tree still running (agent shutdown); returns how many runs were killed."""
    with _running_lock:
        running = list(_running.items())
    for run_id, proc in running:
        kill_tree(proc, run_id)
    return len(running)


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
    on a non-zero exit. Past ``max_output_bytes`` on a stream the tool is killed, the rest of
    its output dropped and ``truncated`` set (with ``check``: ``ToolOutputTooLarge``). A
    missing executable raises ``ToolMissing``.
    """
    if not argv:
        raise ValueError("empty argv")
    started = time.monotonic()
    run_id = f"{os.getpid()}-{next(_run_ids)}-{_RUN_TOKEN}"
    try:
        proc = subprocess.Popen(
            list(argv),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=_tool_env(env, run_id),
            start_new_session=True,
            close_fds=True,
        )
    except OSError as exc:
        if exc.errno not in (errno.ENOENT, errno.EACCES, errno.EPERM, errno.ENOEXEC):
            raise
        if exc.errno == errno.ENOENT and not os.path.lexists(argv[0]):
            raise ToolMissing(argv[0], [argv[0]]) from exc
        raise ToolCannotRun(argv[0], why_cannot_run(argv[0]) or exc.strerror or str(exc)) from exc
    with _running_lock:
        _running[run_id] = proc
    try:
        return _collect(proc, argv, run_id, started=started, timeout_s=timeout_s, max_output_bytes=max_output_bytes,
                        check=check)
    finally:
        with _running_lock:
            _running.pop(run_id, None)


def _exit_fd(proc: subprocess.Popen[bytes]) -> int | None:
    """A descriptor that turns readable when the direct child exits (Linux 5.3+), else None (then polled)."""
    pidfd_open = getattr(os, "pidfd_open", None)
    if pidfd_open is None:
        return None
    try:
        fd: int = pidfd_open(proc.pid)
    except OSError:  # ENOSYS (an older kernel), EMFILE
        return None
    return fd


def _collect(proc: subprocess.Popen[bytes], argv: Sequence[str], run_id: str, *, started: float, timeout_s: float,
             max_output_bytes: int, check: bool) -> RunResult:
    # One growing buffer per stream: a large one lives in its own mapping, handed back to the OS
    # when the call ends, where a list of 64 KiB chunks would leave the heap fragmented and big.
    outputs = {1: bytearray(), 2: bytearray()}
    truncated = False
    deadline = started + timeout_s
    timed_out = False
    leftovers = False  # the direct child exited while something else still held its pipes
    assert proc.stdout is not None and proc.stderr is not None
    # The child's exit is watched in the same wait as its output (no waitpid each turn, no sleeping
    # reap loop after the pipes close); without a pidfd it is polled each turn.
    exit_fd = _exit_fd(proc)
    with contextlib.ExitStack() as cleanup:
        if exit_fd is not None:
            cleanup.callback(os.close, exit_fd)
        selector = cleanup.enter_context(selectors.PollSelector())
        selector.register(proc.stdout, selectors.EVENT_READ, 1)
        selector.register(proc.stderr, selectors.EVENT_READ, 2)
        if exit_fd is not None:
            selector.register(exit_fd, selectors.EVENT_READ, 0)
        try:
            exited_at: float | None = None
            streams = 2
            while streams:
                now = time.monotonic()
                if exited_at is None and exit_fd is None and proc.poll() is not None:
                    exited_at = now
                if exited_at is not None and now - exited_at > _DRAIN_AFTER_EXIT_S:
                    leftovers = True
                    break
                remaining = deadline - now
                if remaining <= 0:
                    timed_out = True
                    break
                # With a pidfd nothing needs polling until the child exits: one wake per event, not one
                # every 0.25 s of a 0.1-0.3 s tool (most runs took a wake more than needed).
                if exited_at is not None:
                    wait = min(remaining, 0.05)
                else:
                    wait = remaining if exit_fd is not None else min(remaining, 0.25)
                for key, _ in selector.select(timeout=wait):
                    stream = key.data
                    if stream == 0:
                        selector.unregister(key.fileobj)
                        exited_at = time.monotonic()
                        continue
                    data = os.read(key.fd, _READ_CHUNK)
                    if not data:
                        selector.unregister(key.fileobj)
                        streams -= 1
                        continue
                    room = max_output_bytes - len(outputs[stream])
                    if len(data) > room:
                        data = data[:max(room, 0)]
                        if not truncated:
                            truncated = True
                            kill_tree(proc, run_id)  # the other stream is still drained to its end
                    outputs[stream] += data
            if not timed_out:
                remaining = max(0.0, deadline - time.monotonic())
                if exit_fd is not None and exited_at is None and not selector.select(timeout=remaining):
                    timed_out = True  # both pipes closed, the child still running at the deadline
                else:
                    try:
                        proc.wait(timeout=remaining)
                    except subprocess.TimeoutExpired:
                        timed_out = True
        finally:
            if timed_out or leftovers or proc.returncode is None:
                kill_tree(proc, run_id)
            # A child stuck in uninterruptible sleep (a wedged driver call) keeps its pending
            # SIGKILL until the call returns; nothing more can be done here.
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=_REAP_GRACE_S)
            proc.stdout.close()
            proc.stderr.close()
    stdout = outputs[1].decode("utf-8", errors="replace")
    if timed_out:
        raise ToolTimeout(argv, timeout_s, stdout)
    result = RunResult(
        argv=tuple(argv),
        returncode=proc.returncode if proc.returncode is not None else -1,
        stdout=stdout,
        stderr=outputs[2].decode("utf-8", errors="replace"),
        duration_s=time.monotonic() - started,
        truncated=truncated,
    )
    if check and truncated:
        raise ToolOutputTooLarge(result, max_output_bytes)
    if check and result.returncode != 0:
        raise ToolFailed(result)
    return result
