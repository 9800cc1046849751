"""The ``npuwatch`` command line."""

from __future__ import annotations

import argparse
import contextlib
import errno
import logging
import os
import signal
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from agent import __version__
from agent.core.cli_options import command_named, options_everywhere, verbose_everywhere
from agent.core.config import Config, ConfigError, load_config
from agent.core.flag_values import listen_address_flag, type_value_flags
from agent.core.terminal import add_color_option
from agent.demo.discovery import DEFAULT_DEMO_DIR
from agent.demo.state import DEMO_DIR_ENV, DemoDirUnusable
from agent.health.status import EXIT_STATUS_HELP
from agent.health.windows import add_window_arguments

__all__ = ["build_parser", "main"]

log = logging.getLogger("npuwatch")

EXIT_OK = 0
EXIT_COLLECT_FAILED = 1  # once: a collector failed (the exposition is still printed)
EXIT_CONFIG = 2
EXIT_BROKEN_PIPE = 128 + 13  # SIGPIPE, as a shell reports it
DEMO_LISTEN_ADDRESS = "127.0.0.1"  # a demo serves this machine only, unless --web.listen-address says otherwise

DESCRIPTION = """\
npuwatch watches Huawei Ascend NPU nodes: it reads npu-smi, hccn_tool and
ascend-dmi, scans CANN/HCCL logs, runs GEMM and all-reduce probes, and serves
everything as Prometheus metrics on /metrics.
"""

EPILOG = """\
examples:
  npuwatch run --demo                  simulated 8 x 910B3 node on http://127.0.0.1:9611/metrics
  npuwatch once --config /etc/npuwatch/config.yaml
  npuwatch check-config /etc/npuwatch/config.yaml
  npuwatch scan-logs ~/ascend/log --json
  npuwatch diagnose
  npuwatch bundle --since 2h           then, on any machine: npuwatch triage *.tar.gz
  npuwatch check --level quick --exit-codes npd
  npuwatch probe gemm --backend cpu
  npuwatch faults clear --npu 3        after the repair of a chip held at ManuallySeparateNPU
  npuwatch top                         the live view of this node (q quits, ? for the keys)
"""


SCAN_LOGS_EXIT = EXIT_STATUS_HELP + """\
Unreadable inputs are named on stderr. Colour: --color, or NO_COLOR=1 to turn it off.
"""

DIAGNOSE_EXIT = EXIT_STATUS_HELP + """\
Progress goes to stderr on a terminal only. Colour: --color, or NO_COLOR=1 to turn it off.
"""


def _common(parser: argparse.ArgumentParser, with_demo: bool = True) -> None:
    parser.add_argument("--config", "--config.file", dest="config", metavar="FILE",
                        help="YAML config file (default: built-in defaults)")
    if with_demo:
        demo = parser.add_argument_group("demo node")
        demo.add_argument("--demo", action="store_true",
                          help="run against the built-in simulated 8 x 910B3 node (fake npu-smi/hccn_tool)")
        demo.add_argument("--demo-dir", type=Path, metavar="DIR",
                          help="demo state directory; implies --demo (default: $NPUWATCH_DEMO_DIR, else "
                               f"{DEFAULT_DEMO_DIR}, one per user: the running demo's; a command other than run "
                               "finding no demo node there uses a temporary one and removes it)")
        demo.add_argument("--demo-chips", type=int, default=8, metavar="N", help="chips on the demo node")
    tools = parser.add_argument_group("tools", "override tool paths from the config")
    tools.add_argument("--tool.npu-smi", dest="tool_npu_smi", metavar="PATH")
    tools.add_argument("--tool.hccn-tool", dest="tool_hccn_tool", metavar="PATH")
    tools.add_argument("--tool.ascend-dmi", dest="tool_ascend_dmi", metavar="PATH")


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The whole command line; with ``command``, the other commands are listed but their options are not built.

    Building a command's options imports its package (top, triage, probes ...): the agent (``run``) would
    carry them all in memory for nothing."""

    def wanted(name: str) -> bool:
        return command is None or command == name

    parser = argparse.ArgumentParser(
        prog="npuwatch", description=DESCRIPTION, epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"npuwatch {__version__}")
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    run = sub.add_parser("run", help="the agent: collect on a schedule and serve /metrics and /healthz",
                         description="Run the agent until SIGTERM; SIGHUP reloads the config.")
    _common(run)
    web = run.add_argument_group("web")
    web.add_argument("--web.listen-address", dest="listen_address", metavar="ADDR", type=listen_address_flag,
                     help="address to listen on, with or without a port: 0.0.0.0, :9611, host:9611, [::1]:9611 "
                          "(config: web.listen_address, default 0.0.0.0; "
                          f"with --demo {DEMO_LISTEN_ADDRESS} whatever the config says)")
    web.add_argument("--web.port", "--port", dest="port", type=int, metavar="PORT",
                     help="port to listen on (config: web.port, default 9611)")

    once = sub.add_parser("once", help="one pass of every enabled collector; exposition on stdout")
    _common(once)
    once.add_argument("--probes", action="store_true", help="also run the GEMM and all-reduce probes")
    once.add_argument("--openmetrics", action="store_true", help="print OpenMetrics instead of text 0.0.4")

    dcmi = sub.add_parser("dcmi", help="the DCMI library and one chip read through DCMI and npu-smi side by side "
                          "(exit 0 agree, 1 a field disagrees, 2 no DCMI, 3 no npu-smi to compare with)")
    _common(dcmi)
    dcmi.add_argument("--chip", type=int, default=0, metavar="N", help="which chip of the list (default the first)")

    check = sub.add_parser("check-config", help="validate a config file and exit (2 when invalid)")
    check.add_argument("file", metavar="FILE")

    scan = sub.add_parser(
        "scan-logs", help="scan HCCL/CANN logs, job logs or dmesg dumps for errors (exit 0 none, 1 found, "
        "3 nothing or not all read)",
        description="Count HCCL/CANN error incidents in log files and directories (plain or .gz), name the\n"
                    "first one and what the logs blame, each with its file and line, and end with a verdict\n"
                    "and the next step.",
        epilog=SCAN_LOGS_EXIT, formatter_class=argparse.RawDescriptionHelpFormatter)
    scan.add_argument("paths", nargs="+", metavar="PATH", help="files or directories (plain or .gz)")
    scan.add_argument("--json", action="store_true", help="one JSON object on stdout")
    add_color_option(scan)

    diagnose = sub.add_parser(
        "diagnose", help="HCCL-timeout triage of this node (exit 0 ok, 1 warn, 2 fail, 3 unknown)",
        description="Check this node for what explains an HCCL timeout and end with one verdict: the cause,\n"
                    "every device it was found on, what to do next and the runbook to open.",
        epilog=DIAGNOSE_EXIT, formatter_class=argparse.RawDescriptionHelpFormatter)
    _common(diagnose)
    diagnose.add_argument("--json", action="store_true", help="machine-readable output")
    diagnose.add_argument("--probes", action="store_true", help="also run GEMM and node all-reduce baselines")
    diagnose.add_argument("--sample-gap", dest="sample_gap", metavar="DURATION",
                          help="gap between the two optics/counter samples: seconds or 500ms, 3s (default 3s)")
    add_window_arguments(diagnose)
    add_color_option(diagnose)

    bundle = sub.add_parser(
        "bundle", help="write one tar.gz of this node's recent HCCL logs, dumps and tool readings for triage",
        description="Collect what `npuwatch triage` needs from this node into one tar.gz (path on stdout).")
    _common(bundle)
    bundle.add_argument("--since", default="2h", metavar="DURATION", help="logs and dumps modified this recently "
                        "(default 2h)")
    bundle.add_argument("-o", "--output", metavar="FILE", help="where to write (default: "
                        "./npuwatch-bundle-<node>-<time>.tar.gz)")
    bundle.add_argument("--node", metavar="NAME", help="node name (default: labels.node, else the hostname)")
    bundle.add_argument("--max-log-bytes", dest="max_log_bytes", default="512MiB", metavar="SIZE",
                        help="log bytes at most, newest first (default 512MiB)")
    bundle.add_argument("--log-path", dest="log_path", action="append", metavar="DIR",
                        help="another CANN log root (repeatable)")
    bundle.add_argument("--dump-path", dest="dump_path", action="append", metavar="DIR|PREFIX",
                        help="where the job writes flight-recorder dumps, if not a default (repeatable)")
    bundle.add_argument("--rank-table", dest="rank_table", metavar="FILE",
                        help="the job's rank table (default: $RANK_TABLE_FILE)")

    triage = sub.add_parser(
        "triage", help="find the rank, node and cause behind an HCCL timeout from bundles or log directories "
        "(exit 0 none, 1 culprit named, 2 culprit unknown, 3 unreadable)",
        description="Read bundles (npuwatch bundle) or directories (one node each), group ranks by communicator "
                    "and name the culprit of each HCCL incident with its evidence.",
        epilog=EXIT_STATUS_HELP, formatter_class=argparse.RawDescriptionHelpFormatter)
    triage.add_argument("paths", nargs="*", metavar="PATH", help="bundles or directories")
    triage.add_argument("--rank-table", dest="rank_table", metavar="FILE", help="the job's rank table (hccl.json)")
    triage.add_argument("--since", metavar="TIME", help="from this time (2h, 2025-10-24 10:00, epoch seconds)")
    triage.add_argument("--until", metavar="TIME", help="up to this time")
    triage.add_argument("--json", action="store_true", help="one JSON object on stdout")
    triage.add_argument("--jobs", type=int, metavar="N", help="worker processes (default: CPUs, at most one per input)")
    if wanted("triage"):
        from agent.triage import prometheus as triage_prometheus

        triage_prometheus.add_arguments(triage)
    gate = sub.add_parser(
        "check", help="tiered node checks with one verdict (exit 0 ok, 1 warn, 2 fail, 3 unknown)",
        description="Run the quick, medium or long checks of this node and gate jobs on the verdict.",
        epilog=EXIT_STATUS_HELP, formatter_class=argparse.RawDescriptionHelpFormatter)
    _common(gate)
    baseline = sub.add_parser("check-baseline", help="fleet medians for `npuwatch check --baseline`",
                              description="Build a fleet baseline from `npuwatch check --json` reports or "
                                          "from Prometheus.")
    if wanted("check") or wanted("check-baseline"):
        from agent.check import cli as check_cli

        check_cli.add_arguments(gate)
        check_cli.add_baseline_arguments(baseline)

    probe = sub.add_parser("probe", help="run a probe now: gemm, allreduce, membw, h2d, p2p, sustained-gemm "
                                         "(exit 0 pass, 1 warn, 2 fail, 3 error)")
    if wanted("probe"):
        from agent.probes import cli as probe_cli

        probe_cli.add_arguments(probe)

    faults = sub.add_parser("faults", help="held ManuallySeparateNPU levels and error-code history; clear one "
                                           "after the repair (exit 0 done, 1 nothing to clear)",
                            description="Show or clear the error-code history the agent keeps in "
                                        "<state_dir>/fault_history.json (docs/fault-codes.md).")
    faults.add_argument("--config", "--config.file", dest="config", metavar="FILE",
                        help="YAML config file, for state_dir (default: built-in defaults)")
    faults.add_argument("--demo-dir", type=Path, metavar="DIR",
                        help="the --demo-dir of `npuwatch run --demo`: its state directory (default: "
                             "$NPUWATCH_DEMO_DIR when set, else the config's state_dir)")
    if wanted("faults"):
        from agent.handling import cli as faults_cli

        faults_cli.add_arguments(faults)
    options_everywhere(faults, ("config", "demo_dir"))

    top = sub.add_parser("top", help="a live view of this node from its agent (or --url another node's): "
                                     "utilization, HBM, temperature, power, codes, links, the HCCL incident",
                         description="A full-screen view of one node, refreshed every 2 s; it reads the agent's "
                                     "/metrics and runs no tool.\nExit status: 0 after q (or --once), 2 when no "
                                     "agent answers.")
    _common(top)
    if wanted("top"):
        from agent.top import cli as top_cli

        top_cli.add_arguments(top)

    demo = sub.add_parser("demo", help="switch faults on the demo node while `npuwatch run --demo` runs")
    if wanted("demo"):
        from agent.demo import cli as demo_cli

        demo_cli.add_arguments(demo)
    options_everywhere(demo, ("demo_dir",))
    verbose_everywhere(parser)
    type_value_flags(parser)
    return parser


def _tool_overrides(args: argparse.Namespace) -> dict[str, Any]:
    overrides: dict[str, Any] = {}
    for attr, key in (("tool_npu_smi", "npu_smi"), ("tool_hccn_tool", "hccn_tool"),
                      ("tool_ascend_dmi", "ascend_dmi")):
        value = getattr(args, attr, None)
        if value:
            overrides[f"collectors.{key}.path"] = value
    address: tuple[str, int | None] | None = getattr(args, "listen_address", None)
    flag_port: int | None = getattr(args, "port", None)
    if address:
        host, address_port = address
        overrides["web.listen_address"] = host
        if address_port is not None and flag_port is not None and address_port != flag_port:
            raise ConfigError([f"--web.listen-address says port {address_port} and --web.port {flag_port}: "
                               "give the port once"], "command line")
        if address_port is not None:
            overrides["web.port"] = address_port
    if flag_port is not None:
        overrides["web.port"] = flag_port
    return overrides


def _load(args: argparse.Namespace) -> Config:
    from agent.core.config import apply_overrides

    config = load_config(args.config)
    overrides = _tool_overrides(args)
    return apply_overrides(config, overrides) if overrides else config


def _demo_dir(args: argparse.Namespace) -> Path | None:
    from agent.demo.discovery import demo_dir_of

    return demo_dir_of(args)


def cmd_check_config(args: argparse.Namespace) -> int:
    """Every problem of the config and of the web config it names, in one report."""
    from agent.web.config import load_web_config

    try:
        config = load_config(args.file)
    except ConfigError as exc:
        problems = list(exc.problems)
        web_file = _web_config_file(args.file)
        if web_file:
            try:
                load_web_config(web_file)
            except ConfigError as web_exc:
                problems += [f"web.config_file ({web_exc.source}): {p}" for p in web_exc.problems]
        raise ConfigError(problems, exc.source) from None
    if config.web.config_file:
        try:
            load_web_config(config.web.config_file)
        except ConfigError as exc:
            raise ConfigError([f"web.config_file ({exc.source}): {p}" for p in exc.problems], args.file) from None
    from agent.core.config_warnings import config_warnings
    from agent.handling.levels import table_warnings

    for warning in [*config_warnings(config), *table_warnings(config)]:
        print(f"{args.file}: warning: {warning}")
    print(f"{args.file}: valid config (listen {config.web.listen_address}:{config.web.port})")
    return EXIT_OK


def _web_config_file(path: str) -> str | None:
    """``web.config_file`` as written in an invalid config, so its problems are reported too."""
    from agent.core.config import read_yaml_file

    try:
        raw = read_yaml_file(path)
    except ConfigError:
        return None
    web = raw.get("web") if isinstance(raw, dict) else None
    value = web.get("config_file") if isinstance(web, dict) else None
    return value if isinstance(value, str) else None


def cmd_once(args: argparse.Namespace) -> int:
    from agent.daemon.assemble import build_agent

    bundle = build_agent(_load(args), _demo_dir(args), args.demo_chips)
    agent = bundle.agent
    try:
        agent.collect_once()
        if args.probes:
            from agent.probes.job import run_all_probes_now

            run_all_probes_now(agent)
        sys.stdout.buffer.write(agent.cache.render(openmetrics=args.openmetrics).body)
        sys.stdout.flush()
        failed = _failed_collectors(agent.store.all())
    finally:
        agent.stop()
    for reason, names in failed.items():
        print(f"npuwatch once: {len(names)} collector(s) down ({reason}): {', '.join(names)}", file=sys.stderr)
    return EXIT_COLLECT_FAILED if failed else EXIT_OK


def _failed_collectors(snapshots: Sequence[Any]) -> dict[str, list[str]]:
    """Collectors down for a fault (not for "no data here"), by reason: {reason: [names]}.

    The cause itself was logged once as a warning; this is the summary under it.
    """
    failed: dict[str, list[str]] = {}
    for snap in sorted(snapshots, key=lambda s: s.source):
        if not snap.ok and snap.down_reason not in ("no_data", "not_run", None):
            failed.setdefault(snap.down_reason, []).append(snap.source)
    return failed


def _host_port(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def _listen_hint(exc: OSError) -> str:
    """Which setting to change: the port when it is taken or privileged, else the address."""
    if exc.errno in (errno.EADDRINUSE, errno.EACCES):
        return "change web.port or --web.port"
    return "change web.listen_address or --web.listen-address to an address of this machine"


def cmd_run(args: argparse.Namespace) -> int:
    from agent.daemon.assemble import build_agent

    demo_dir = _demo_dir(args)
    if demo_dir is not None and not args.listen_address:
        args.listen_address = (DEMO_LISTEN_ADDRESS, None)  # also for the config a SIGHUP reloads
    config = _load(args)
    bundle = build_agent(config, demo_dir, args.demo_chips)
    agent = bundle.agent
    log.info("npuwatch %s: %d collectors (%s)", __version__, len(agent.store.all()),
             ", ".join(sorted(snap.source for snap in agent.store.all())))
    if bundle.demo is not None:
        log.info("demo node: %d simulated chips, state in %s (switch faults with `npuwatch demo "
                 "--demo-dir %s ...`)", args.demo_chips, demo_dir, demo_dir)
    # The main thread sleeps in a read of a pipe that the interpreter's C-level handler writes each
    # signal's number to (signal.set_wakeup_fd): no polling loop (a 0.1 s sleep woke it 36,000 times an
    # hour), and the numbers come with the wake, so none is missed while the Python-level handler, which
    # only keeps the signal from ending the process, has not run yet. A handler that took a lock
    # (Event.set) could interrupt the main thread holding that same lock and deadlock the agent for good.
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_w, False)
    previous_wakeup = signal.set_wakeup_fd(wake_w)

    def on_signal(_signum: int, _frame: Any) -> None:
        return None

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGHUP, on_signal)
    try:
        return _run_until_stopped(args, agent, demo_dir, wake_r)
    finally:
        signal.set_wakeup_fd(previous_wakeup)
        os.close(wake_r)
        os.close(wake_w)


def _run_until_stopped(args: argparse.Namespace, agent: Any, demo_dir: Path | None, wake_r: int) -> int:
    try:
        agent.start()
    except OSError as exc:
        web = agent.config.web
        log.error("cannot listen on %s: %s (%s)", _host_port(web.listen_address, web.port),
                  exc.strerror or exc, _listen_hint(exc))
        agent.stop()
        return 1
    if demo_dir is not None:
        from agent.demo.discovery import write_agent

        write_agent(demo_dir, agent.config.web)
    from agent.probes.job import schedule_probes

    schedule_probes(agent)
    try:
        while True:
            batch = list(os.read(wake_r, 64))  # sleeps until signals arrive: their numbers, one byte each
            stops = [sig for sig in batch if sig in (signal.SIGTERM, signal.SIGINT)]
            if stops:
                log.info("received %s, shutting down", signal.Signals(stops[0]).name)
                break
            if signal.SIGHUP in batch:
                _reload(agent, args)
    finally:
        if demo_dir is not None:
            from agent.demo.discovery import forget_agent

            forget_agent(demo_dir)
        agent.stop()
    return EXIT_OK


def _reload(agent: Any, args: argparse.Namespace) -> None:
    try:
        config = _load(args)
        if args.demo and args.demo_dir is None:
            log.warning("SIGHUP: a demo without --demo-dir keeps its config")
            return
        if args.demo:
            from agent.core.config import apply_overrides
            from agent.demo.node import demo_overrides

            demo_dir = Path(args.demo_dir)
            config = apply_overrides(config, demo_overrides(demo_dir, demo_dir / "bin", config))
    except ConfigError as exc:
        log.error("SIGHUP: keeping the running config; the new one is %s", exc)
        agent.reload_failed()
        return
    except Exception:  # whatever a broken file raises, the running agent keeps its config and serves on
        log.exception("SIGHUP: keeping the running config; the new one could not be read")
        agent.reload_failed()
        return
    if agent.reload(config):
        log.info("SIGHUP: config reloaded")


def cmd_scan_logs(args: argparse.Namespace) -> int:
    from agent.diagnose import scan_logs

    return scan_logs.main(args.paths, as_json=args.json, color=args.color)


def cmd_diagnose(args: argparse.Namespace) -> int:
    from agent.diagnose import engine as diagnose

    return diagnose.main(args, _load(args), _demo_dir(args))


def cmd_bundle(args: argparse.Namespace) -> int:
    from agent.triage import bundle

    return bundle.main(args, _load(args), _demo_dir(args))


def cmd_triage(args: argparse.Namespace) -> int:
    from agent.triage import command as triage

    return triage.main(args)
def cmd_check(args: argparse.Namespace) -> int:
    from agent.check import cli as check_cli

    config = _load(args)
    demo_dir = _demo_dir(args)
    if demo_dir is not None:
        from agent.core.config import apply_overrides
        from agent.demo.discovery import agent_check_overrides

        config = apply_overrides(config, agent_check_overrides(config, demo_dir))
    return check_cli.main(args, config, demo_dir)


def cmd_top(args: argparse.Namespace) -> int:
    from agent.top import cli as top_cli

    config = _load(args)
    demo_dir = _demo_dir(args)
    if demo_dir is None:
        from agent.daemon.standalone import standalone_agent

        return top_cli.main(args, config, standalone=lambda: standalone_agent(config))
    from agent.demo.discovery import running_agent_url

    serving = running_agent_url(demo_dir)
    if serving is not None and not args.url:
        args.url = serving
        return top_cli.main(args, config, node=top_cli.DEMO_NODE)
    from agent.daemon.assemble import build_agent

    bundle = build_agent(config, demo_dir, args.demo_chips)  # a demo agent in this process, serving no port
    agent = bundle.agent
    agent.collect_once()
    agent.start(serve_http=False)
    try:
        return top_cli.main(args, config, render=lambda: agent.cache.render().body, node=top_cli.DEMO_NODE)
    finally:
        agent.stop()


def cmd_check_baseline(args: argparse.Namespace) -> int:
    from agent.check import cli as check_cli

    return check_cli.baseline_main(args)


def cmd_probe(args: argparse.Namespace) -> int:
    from agent.probes import cli as probe_cli

    return probe_cli.main(args)


def cmd_faults(args: argparse.Namespace) -> int:
    from agent.core.config import apply_overrides
    from agent.demo.discovery import default_demo_dir
    from agent.handling import cli as faults_cli

    config = load_config(args.config)
    demo_dir = args.demo_dir or (default_demo_dir() if os.environ.get(DEMO_DIR_ENV, "").strip() else None)
    if demo_dir is not None:
        config = apply_overrides(config, {"state_dir": str(demo_dir / "state")})
    return faults_cli.main(args, config)


def cmd_demo(args: argparse.Namespace) -> int:
    from agent.demo import cli as demo_cli

    return demo_cli.main(args)


def cmd_dcmi(args: argparse.Namespace) -> int:
    from agent.dcmi.command import main as dcmi_main

    return dcmi_main(_load(args), chip_index=args.chip)


COMMANDS = {
    "run": cmd_run,
    "once": cmd_once,
    "dcmi": cmd_dcmi,
    "check-config": cmd_check_config,
    "scan-logs": cmd_scan_logs,
    "diagnose": cmd_diagnose,
    "bundle": cmd_bundle,
    "triage": cmd_triage,
    "check": cmd_check,
    "check-baseline": cmd_check_baseline,
    "probe": cmd_probe,
    "faults": cmd_faults,
    "top": cmd_top,
    "demo": cmd_demo,
}


def main(argv: Sequence[str] | None = None) -> int:
    from agent.core.logging_setup import setup_logging

    parser = build_parser(command_named(sys.argv[1:] if argv is None else argv, COMMANDS))
    args = parser.parse_args(argv)
    # Only the agent logs its progress; a one-shot command (a Slurm prolog's check) is quiet unless -v.
    setup_logging(level="info" if args.command == "run" else "warning", verbose=args.verbose)
    try:
        with contextlib.ExitStack() as cleanup:
            args.cleanup = cleanup
            return COMMANDS[args.command](args)
    except (ConfigError, DemoDirUnusable) as exc:
        print(f"npuwatch: {exc}", file=sys.stderr)
        return EXIT_CONFIG
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        # `npuwatch ... | head`: the reader is gone. Point stdout at /dev/null so the interpreter's
        # final flush cannot raise again, and exit as a shell expects after SIGPIPE.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return EXIT_BROKEN_PIPE
