"""``npuwatch top``: its options and its run (the live screen, or ``--once`` for one plain frame)."""

from __future__ import annotations

import argparse
import os
import shutil
import socket
import sys
import urllib.parse
from collections.abc import Callable
from typing import IO, TYPE_CHECKING, Any

from agent.top.fetch import PASSWORD_ENV, NoLocalAgent, Reader, source_from_args
from agent.top.history import History
from agent.top.model import Fetched, NodeView, parse_view, samples_of
from agent.top.render import SORT_KEYS, TopState, frame, plain

if TYPE_CHECKING:
    from agent.core.config import Config

__all__ = ["DEMO_NODE", "EXIT_NO_AGENT", "STANDALONE_MODE", "Standalone", "add_arguments", "main"]

EXIT_OK = 0
EXIT_NO_AGENT = 2


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--url", metavar="URL",
                        help="another node's agent, e.g. http://node-7:9611 (default: the local agent of --config)")
    parser.add_argument("--interval", default="2s", metavar="DURATION", help="refresh period (default 2s)")
    parser.add_argument("--once", action="store_true", help="print one frame as plain text and exit")
    parser.add_argument("--sort", choices=tuple(SORT_KEYS), default="npu", help="the column rows are sorted by")
    parser.add_argument("--no-color", dest="no_color", action="store_true", help="no colour (also: $NO_COLOR)")
    client = parser.add_argument_group("client (for --url, or a local agent that asks for them)")
    client.add_argument("--user", metavar="USER", help="basic auth user")
    client.add_argument("--password-file", dest="password_file", metavar="FILE",
                        help=f"basic auth password, first line of FILE (default: ${PASSWORD_ENV})")
    client.add_argument("--ca-file", dest="ca_file", metavar="FILE", help="CA bundle for an https:// URL")
    client.add_argument("--cert-file", dest="cert_file", metavar="FILE", help="client certificate (PEM)")
    client.add_argument("--key-file", dest="key_file", metavar="FILE", help="its key, when not in --cert-file")
    client.add_argument("--insecure", action="store_true", help="do not verify the server's TLS certificate")
    client.add_argument("--timeout", default="5s", metavar="DURATION", help="per read (default 5s)")


_LOOPBACK = ("localhost", "127.0.0.1", "::1")


def _node_name(args: Any, config: Config, view: NodeView | None = None) -> str:
    """The node the agent says it is (its ``node`` label), else the one ``--url`` names, else this node (a
    loopback address is this node too: the name says more than 127.0.0.1)."""
    if view is not None and view.node:
        return view.node
    host = urllib.parse.urlparse(args.url).hostname if getattr(args, "url", None) else None
    if host and host not in _LOOPBACK and not host.startswith("127."):
        return host
    return str(config.labels.get("node") or socket.gethostname())


DEMO_NODE = "demo-node"  # what the header calls the demo's simulated node (not this machine's NPUs)


Standalone = Callable[[], "tuple[Callable[[], bytes], Callable[[], None]]"]
STANDALONE_MODE = "standalone: no agent answered, top reads the tools itself"
DEMO_MODE = "demo: no demo agent is running, top runs one in this process"


def main(args: Any, config: Config, *, render: Callable[[], bytes] | None = None, out: IO[str] | None = None,
         err: IO[str] | None = None, node: str | None = None, standalone: Standalone | None = None) -> int:
    """``render``: the exposition of an agent in this process (``--demo``), instead of reading one; ``node``: the
    header's name for the node (default: the agent's ``node`` label, else the host ``--url`` names, else this
    host's name); ``standalone``: starts an agent in this process (its exposition and its stop) for when the
    local agent does not answer (``agent.daemon.standalone``)."""
    from agent.core.config_values import parse_duration

    out = out or sys.stdout
    err = err or sys.stderr
    first: Fetched | None = None
    try:
        interval = parse_duration(args.interval)
        args.timeout = parse_duration(args.timeout)
        if interval <= 0:
            raise ValueError(f"--interval must be positive, got {args.interval!r}")
        if render is not None:
            read = _in_process(render, "the demo agent in this process", DEMO_MODE)
        else:
            read = Reader(source_from_args(args, config)).read
            first = read()
    except NoLocalAgent as exc:
        if standalone is None:
            print(f"npuwatch top: {exc}", file=err)
            return EXIT_NO_AGENT
        first = Fetched(None, None, str(exc), "this node's agent")  # read below, by the standalone agent
    except ValueError as exc:
        print(f"npuwatch top: {exc}", file=err)
        return EXIT_NO_AGENT
    stop: Callable[[], None] | None = None
    if first is not None and first.view is None and _standalone_wanted(args, first, standalone):
        assert standalone is not None
        print(f"npuwatch top: no agent answered at {first.where} ({first.error}): reading the tools in this "
              "process", file=err)
        served, stop = standalone()
        read = _in_process(served, "the tools, read by top itself", STANDALONE_MODE)
        first = None
    try:
        return _show(args, read, first or read(), out=out, err=err, interval=interval, node=node, config=config)
    finally:
        if stop is not None:
            stop()


def _standalone_wanted(args: Any, first: Fetched, standalone: Standalone | None) -> bool:
    """No agent answers on this node (nothing listens, no textfile, none configured): not a remote one
    (``--url``), and not one that answered with an HTTP error (it is there: 401 wants a password)."""
    return standalone is not None and not getattr(args, "url", None) and not (first.error or "").startswith("HTTP ")


def _show(args: Any, read: Callable[[], Fetched], first: Fetched, *, out: IO[str], err: IO[str], interval: float,
          node: str | None, config: Config) -> int:
    if first.view is None:
        answered = (first.error or "").startswith("HTTP ")
        said = f"the agent at {first.where} answered {first.error}" if answered else \
            f"no agent to read at {first.where}: {first.error}"
        print(f"npuwatch top: {said}", file=err)
        return EXIT_NO_AGENT
    state = TopState(sort=args.sort, ascii_only=not _utf8(out))
    node = node or _node_name(args, config, first.view)
    if args.once:
        history = History()
        history.add(first.view)
        width = shutil.get_terminal_size((120, 40)).columns
        height = len(first.view.rows) + 30  # every NPU and every panel: a ticket wants them all
        out.write(plain(frame(first, history, state, width=width, height=height, node=node)))
        return EXIT_OK
    import logging

    from agent.top.screen import run_screen

    # The screen owns the terminal: an agent in this process (standalone, --demo) must not log over it; the
    # header says which collectors are down and why.
    logging.disable(logging.ERROR)
    color = not (args.no_color or os.environ.get("NO_COLOR"))
    return run_screen(read, interval_s=interval, node=node, state=state, color=color)


def _in_process(render: Callable[[], bytes], where: str, mode: str | None = None) -> Callable[[], Fetched]:
    import time

    def read() -> Fetched:
        view = parse_view(samples_of(render().decode("utf-8", "replace")))
        return Fetched(view, time.time(), None, where, mode)
    return read


def _utf8(stream: IO[str]) -> bool:
    encoding = getattr(stream, "encoding", None) or "utf-8"
    return encoding.lower().replace("-", "") in ("utf8", "utf8mb4")
