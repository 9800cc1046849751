"""Headless Chromium (Debian's ``chromium``) for the node page: its DOM, its console, a screenshot.

Each run has a user data directory of its own, no network service of the browser's own (background
networking, component updates, sync) and a deadline; the browser's whole process group is killed when
it is over. Console messages come from ``--enable-logging=stderr --v=0``, one ``:CONSOLE`` line each.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

__all__ = ["BrowserRun", "chromium", "load"]

_NAMES = ("chromium", "chromium-browser")
_FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
          "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-extensions",
          "--enable-logging=stderr", "--v=0")


def chromium() -> str | None:
    """The browser on PATH (Debian: apt-get install chromium), None when there is none."""
    for name in _NAMES:
        found = shutil.which(name)
        if found is not None:
            return found
    return None


@dataclass(frozen=True)
class BrowserRun:
    dom: str  # the DOM after load (--dump-dom), "" for a screenshot run
    console: list[str]  # the page's console messages
    stderr: str


def load(url: str, *, screenshot: Path | None = None, window: tuple[int, int] = (1200, 900),
         timeout_s: float = 60.0) -> BrowserRun:
    """Load ``url``: its DOM, or (``screenshot``) a PNG of the window written there."""
    browser = chromium()
    if browser is None:
        raise FileNotFoundError("chromium not found on PATH: apt-get install chromium")
    with tempfile.TemporaryDirectory(prefix="npuwatch-chromium-") as profile:
        argv = [browser, *_FLAGS, f"--user-data-dir={profile}", f"--window-size={window[0]},{window[1]}"]
        argv += [f"--screenshot={screenshot}"] if screenshot is not None else ["--dump-dom"]
        argv.append(url)
        process = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL,
                                   start_new_session=True, env={**os.environ, "HOME": profile})
        try:
            out, err = process.communicate(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            raise TimeoutError(f"chromium did not finish loading {url} in {timeout_s:.0f} s") from None
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            if process.poll() is None:
                process.wait(timeout=10)
    stderr = err.decode("utf-8", "replace")
    if process.returncode != 0:
        raise RuntimeError(f"chromium exited {process.returncode} loading {url}:\n{stderr[-3000:]}")
    console = [line for line in stderr.splitlines() if ":CONSOLE" in line]
    return BrowserRun(out.decode("utf-8", "replace"), console, stderr)
