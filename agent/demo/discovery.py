"""Where the running demo is: its directory, and the address of the agent serving it.

``npuwatch run --demo`` (and ``./scripts/demo``) keep the node in ``$NPUWATCH_DEMO_DIR``, else
``/tmp/npuwatch-demo-<uid>`` (one per user: two users' demos never share fake tools); every other
``--demo`` command looks there first, so it sees the faults the running demo plays. While it serves,
the agent writes ``DIR/agent.json`` (its ``/metrics`` URL and pid): ``check --demo`` asks that agent,
never whatever else listens on the configured port, and no other install rewrites its fake tools.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import os
import shutil
import sys
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import agent
from agent.demo.state import DEMO_DIR_ENV, STATE_FILE, DemoDirUnusable

if TYPE_CHECKING:
    from agent.core.config import Config
    from agent.core.config_schema import WebSection

__all__ = ["AGENT_FILE", "DEFAULT_DEMO_DIR", "agent_check_overrides", "default_demo_dir", "demo_dir_of",
           "ensure_demo_dir", "forget_agent", "metrics_url", "running_agent", "running_agent_url",
           "running_demo_dir", "this_install", "write_agent"]

log = logging.getLogger(__name__)

DEFAULT_DEMO_DIR = Path(f"/tmp/npuwatch-demo-{os.getuid()}")  # checked to be this user's before use
AGENT_FILE = "agent.json"


def default_demo_dir(environ: Mapping[str, str] | None = None) -> Path:
    """``$NPUWATCH_DEMO_DIR``, else ``/tmp/npuwatch-demo-<uid>``."""
    env = os.environ if environ is None else environ
    value = env.get(DEMO_DIR_ENV, "").strip()
    return Path(value) if value else DEFAULT_DEMO_DIR


def ensure_demo_dir(directory: Path) -> Path:
    """``directory`` created (``0700`` when new) and usable by this user, else DemoDirUnusable in one line."""
    hint = f"give --demo-dir DIR or set {DEMO_DIR_ENV} to a directory of your own"
    try:
        directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        owner = directory.stat().st_uid
    except OSError as exc:
        raise DemoDirUnusable(f"cannot use {directory} as a demo directory: {exc.strerror or exc}; {hint}") from None
    if directory == DEFAULT_DEMO_DIR and owner != os.getuid():  # /tmp is everyone's: never another user's
        raise DemoDirUnusable(f"{directory} belongs to another user (uid {owner}); {hint}")
    if not os.access(directory, os.W_OK | os.X_OK):
        raise DemoDirUnusable(f"cannot use {directory} as a demo directory: not writable by you; {hint}")
    return directory


def running_demo_dir(environ: Mapping[str, str] | None = None) -> Path | None:
    """The default demo directory when a demo node lives there, else None."""
    directory = default_demo_dir(environ)
    return directory if (directory / STATE_FILE).is_file() else None


def demo_dir_of(args: argparse.Namespace) -> Path | None:
    """The demo node a ``--demo`` (or ``--demo-dir``, which implies it) command works on; None without either.

    Without ``--demo-dir``, ``run`` keeps its node in the default directory; the other commands use the
    running demo there, else a temporary node that ``args.cleanup`` (an ExitStack) removes."""
    if getattr(args, "demo_dir", None) is None and not getattr(args, "demo", False):
        return None
    args.demo = True
    if args.demo_dir is None and args.command == "run":
        args.demo_dir = default_demo_dir()
    if args.demo_dir is not None:
        return ensure_demo_dir(Path(args.demo_dir))
    found = running_demo_dir()
    if found is not None:
        return found
    temporary = Path(tempfile.mkdtemp(prefix="npuwatch-demo-"))
    cleanup: contextlib.ExitStack | None = getattr(args, "cleanup", None)
    if cleanup is not None:
        cleanup.callback(shutil.rmtree, temporary, True)
    log.info("no demo node in %s (start one with `npuwatch run --demo`, or set %s): this command uses a "
             "fresh, fault-free node", default_demo_dir(), DEMO_DIR_ENV)
    return temporary


def metrics_url(web: WebSection) -> str:
    """The ``/metrics`` URL of an agent with these web settings, as a client on this machine reaches it."""
    host = web.listen_address
    if host in ("", "0.0.0.0", "::", "[::]"):  # noqa: S104 - a wildcard listener answers on loopback
        host = "127.0.0.1"
    elif ":" in host and not host.startswith("["):
        host = f"[{host}]"
    scheme = "https" if web.config_file else "http"
    return f"{scheme}://{host}:{web.port}/metrics"


def agent_check_overrides(config: Config, directory: Path) -> dict[str, Any]:
    """Config overrides for ``check --demo``: its agent check asks the agent serving this node, and is
    skipped when none does (whatever answers on the configured port then is another node's agent)."""
    url = running_agent_url(directory)
    parts = urlsplit(url) if url else None
    if parts is None or parts.hostname is None or parts.port is None:
        return {"check.skip": sorted({*config.check.skip, "agent"})}
    return {"web.enabled": True, "web.listen_address": parts.hostname, "web.port": parts.port}


def write_agent(directory: Path, web: WebSection) -> None:
    """Record that this process serves the node at ``directory`` with these web settings."""
    path = directory / AGENT_FILE
    temporary = path.with_suffix(".tmp")
    record = {"url": metrics_url(web), "pid": os.getpid(), "install": this_install()}
    temporary.write_text(json.dumps(record) + "\n", encoding="utf-8")
    os.replace(temporary, path)


def forget_agent(directory: Path) -> None:
    """Remove the record, if it is this process's."""
    path = directory / AGENT_FILE
    try:
        if json.loads(path.read_text(encoding="utf-8")).get("pid") == os.getpid():
            path.unlink()
    except (OSError, ValueError, AttributeError):
        pass


def this_install() -> str:
    """Which npuwatch this process is: its interpreter and package, as the demo's fake tools run them."""
    package_root = Path(agent.__file__).resolve().parent.parent
    return f"{os.path.realpath(sys.executable)} {package_root}"


def _running_agent(directory: Path) -> tuple[str, int, str | None] | None:
    try:
        record = json.loads((directory / AGENT_FILE).read_text(encoding="utf-8"))
        url, pid, install = record["url"], int(record["pid"]), record.get("install")
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None
    if not isinstance(url, str) or not _alive(pid):
        return None
    return url, pid, install if isinstance(install, str) else None


def running_agent_url(directory: Path) -> str | None:
    """The ``/metrics`` URL of the agent serving the node at ``directory``; None when none is alive."""
    found = _running_agent(directory)
    return found[0] if found else None


def running_agent(directory: Path) -> tuple[int, str | None] | None:
    """(pid, install: ``this_install()`` of that agent, None when it did not say) of the agent serving the
    node at ``directory``; None when none is alive."""
    found = _running_agent(directory)
    return (found[1], found[2]) if found else None


def _alive(pid: int) -> bool:
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # alive, another user's
        return True
    return True
