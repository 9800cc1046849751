"""The command line as operators type it."""

from __future__ import annotations

import argparse
import contextlib
import errno
import os
import tempfile
from pathlib import Path

import pytest

from agent import __version__, cli
from agent.cli import _demo_dir, build_parser, main
from agent.core.config import ConfigError, build_config
from agent.core.flag_values import duration_flag, positive_duration_flag, size_flag


def test_version_and_help(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        main(["--version"])
    assert info.value.code == 0
    assert capsys.readouterr().out.strip() == f"npuwatch {__version__}"
    with pytest.raises(SystemExit):
        main(["--help"])
    text = capsys.readouterr().out
    for command in ("run", "once", "check-config", "scan-logs", "diagnose", "probe", "demo"):
        assert command in text


@pytest.mark.parametrize(("argv", "option", "kind"), [
    (["top", "--interval", "fast"], "--interval", "duration"),
    (["top", "--timeout", "soon"], "--timeout", "duration"),
    (["bundle", "--since", "fast"], "--since", "duration"),
    (["bundle", "--max-log-bytes", "lots"], "--max-log-bytes", "size"),
    (["diagnose", "--window", "1x"], "--window", "duration"),
    (["triage", "--prometheus", "http://p:9090", "--prometheus-timeout", "long"], "--prometheus-timeout",
     "duration"),
    (["probe", "allreduce", "--bytes", "big"], "--bytes", "size"),
])
def test_a_bad_duration_or_size_names_the_option_and_the_format(
        argv: list[str], option: str, kind: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        build_parser().parse_args(argv)
    assert info.value.code == 2
    error = capsys.readouterr().err.strip().splitlines()[-1]
    assert f"argument {option}: expected a {kind}" in error
    assert ("2h" if kind == "duration" else "512MiB") in error  # the expected format, by example
    assert repr(argv[-1]) in error


def test_every_duration_and_size_flag_arrives_parsed() -> None:
    parser = build_parser()
    top = parser.parse_args(["top", "--interval", "500ms"])
    assert (top.interval, top.timeout) == (0.5, 5.0)  # the string default goes through the same parser
    bundle = parser.parse_args(["bundle", "--since", "90m"])
    assert (bundle.since, bundle.max_log_bytes) == (5400.0, 512 << 20)
    assert parser.parse_args(["diagnose", "--sample-gap", "3"]).sample_gap == 3.0


def _every_action(parser: argparse.ArgumentParser) -> list[argparse.Action]:
    found = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for child in action.choices.values():
                found += _every_action(child)
        else:
            found.append(action)
    return found


def test_no_duration_or_size_flag_parses_on_its_own() -> None:
    typed = {"DURATION": {duration_flag, positive_duration_flag}, "SIZE": {size_flag}}
    for action in _every_action(build_parser()):
        assert action.metavar != "SECONDS", action.option_strings  # a duration flag takes 90s, 2m too
        if action.metavar in typed:
            assert action.type in typed[action.metavar], action.option_strings


def test_a_deadline_is_a_duration_above_zero(capsys: pytest.CaptureFixture[str]) -> None:
    args = build_parser().parse_args(["probe", "sustained-gemm", "--deadline", "2m", "--warmup-seconds", "0"])
    assert (args.deadline, args.warmup_s) == (120.0, 0.0)
    with pytest.raises(SystemExit):
        build_parser().parse_args(["probe", "gemm", "--stall", "0s"])
    assert "argument --stall: expected a duration above zero" in capsys.readouterr().err


@pytest.mark.parametrize("argv", [
    ["faults", "show", "--demo-dir", "D"],
    ["faults", "--demo-dir", "D", "show"],
    ["demo", "set", "hot", "--npu", "4", "--demo-dir", "D"],
    ["demo", "--demo-dir", "D", "set", "hot", "--npu", "4"],
    ["demo", "show", "--demo-dir", "D"],
    ["demo", "clear", "all", "--demo-dir", "D"],
])
def test_common_options_are_taken_before_or_after_the_action(argv: list[str]) -> None:
    assert build_parser().parse_args(argv).demo_dir == Path("D")


def test_faults_config_after_the_action_and_none_given_stays_none() -> None:
    parser = build_parser()
    assert parser.parse_args(["faults", "clear", "--npu", "1", "--config", "c.yaml"]).config == "c.yaml"
    assert parser.parse_args(["faults", "show"]).demo_dir is None


def test_demo_dir_implies_demo(tmp_path: Path) -> None:
    args = build_parser().parse_args(["check", "--demo-dir", str(tmp_path / "node")])
    assert not args.demo
    assert _demo_dir(args) == tmp_path / "node"
    assert args.demo
    assert build_parser().parse_args(["check"]).demo_dir is None
    assert _demo_dir(build_parser().parse_args(["check"])) is None


def test_demo_without_a_dir_finds_the_running_demo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from agent.demo.node import DemoNode

    running = tmp_path / "running"
    DemoNode(running).create(chips=2)
    monkeypatch.setenv("NPUWATCH_DEMO_DIR", str(running))
    assert _demo_dir(build_parser().parse_args(["check", "--demo"])) == running
    assert _demo_dir(build_parser().parse_args(["run", "--demo"])) == running


def test_demo_without_a_running_demo_removes_its_temporary_node(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NPUWATCH_DEMO_DIR", str(tmp_path / "none"))
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    args = build_parser().parse_args(["diagnose", "--demo"])
    with contextlib.ExitStack() as cleanup:
        args.cleanup = cleanup
        made = _demo_dir(args)
        assert made is not None and made.parent == tmp_path and made.is_dir()
    assert not made.exists()
    # run keeps its node where the other commands will look for it
    run = build_parser().parse_args(["run", "--demo"])
    assert _demo_dir(run) == tmp_path / "none"
    assert run.demo_dir == tmp_path / "none"


def test_a_one_shot_command_logs_no_info_unless_verbose(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    import logging

    def chatty(_args: argparse.Namespace) -> int:
        logging.getLogger("agent.demo.node").info("demo: an INFO line")
        logging.getLogger("agent.demo.node").warning("demo: a WARNING line")
        return 0

    monkeypatch.setitem(cli.COMMANDS, "faults", chatty)
    assert main(["faults", "show"]) == 0
    err = capsys.readouterr().err
    assert "WARNING line" in err and "INFO line" not in err
    assert main(["faults", "show", "-v"]) == 0
    assert "INFO line" in capsys.readouterr().err
    monkeypatch.setitem(cli.COMMANDS, "run", chatty)
    assert main(["run"]) == 0
    assert "INFO line" in capsys.readouterr().err  # the agent keeps its log


def test_faults_show_prints_in_text_what_json_shows(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from agent.handling import cli as faults_cli
    from agent.handling.escalation import ChipHistory, Held
    from agent.handling.history import FaultHistory

    history = FaultHistory(tmp_path / "fault_history.json")
    history.update(lambda chips: {"2:0": ChipHistory({"80E18402": 100.0}, {}, {}),
                                  "5:1": ChipHistory({}, {"80E01801": (50.0, 90.0)}, {"80E01801": Held(90.0)})})
    config = argparse.Namespace(state_dir=str(tmp_path))
    assert faults_cli.main(argparse.Namespace(faults_command="show", json=False), config) == 0
    lines = capsys.readouterr().out.splitlines()
    assert any(line.startswith("NPU 2 chip 0: 80E18402 active since") for line in lines), lines
    assert any(line.startswith("NPU 5 chip 1: ManuallySeparateNPU for 80E01801") for line in lines), lines
    history.update(lambda chips: {"2:0": chips["2:0"]})
    assert faults_cli.main(argparse.Namespace(faults_command="show", json=False), config) == 0
    assert "no chip is held at ManuallySeparateNPU" in capsys.readouterr().out


class _Built(Exception):
    pass


@pytest.mark.parametrize(("argv", "address", "port"), [
    (["run", "--demo"], "127.0.0.1", 9611),
    (["run", "--demo", "--web.listen-address", "0.0.0.0"], "0.0.0.0", 9611),
    (["run"], "0.0.0.0", 9611),
    (["run", "--web.listen-address", ":19962"], "0.0.0.0", 19962),  # as node_exporter users write it
    (["run", "--web.listen-address", "10.0.0.5:19962"], "10.0.0.5", 19962),
    (["run", "--web.listen-address", "[::1]:19962"], "::1", 19962),
    (["run", "--web.listen-address", "[::1]"], "::1", 9611),
    (["run", "--web.listen-address", "::1", "--web.port", "9700"], "::1", 9700),
    (["run", "--web.listen-address", ":9700", "--web.port", "9700"], "0.0.0.0", 9700),
])
def test_the_demo_listens_on_loopback_unless_told_otherwise(argv: list[str], address: str, port: int,
                                                           tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from agent.daemon import assemble

    seen = []

    def build(config: object, *_args: object) -> None:
        seen.append(config)
        raise _Built

    monkeypatch.setenv("NPUWATCH_DEMO_DIR", str(tmp_path / "demo"))
    monkeypatch.setattr(assemble, "build_agent", build)
    args = build_parser().parse_args(argv)
    with pytest.raises(_Built):
        cli.cmd_run(args)
    assert seen[0].web.listen_address == address  # type: ignore[attr-defined]
    assert seen[0].web.port == port  # type: ignore[attr-defined]


@pytest.mark.parametrize(("argv", "error"), [
    (["run", "--web.listen-address", "1.2.3.4:99999"], "the port in \"1.2.3.4:99999\" is not 1-65535"),
    (["run", "--web.listen-address", "[::1"], "expected an address, host:port or [IPv6]:port"),
])
def test_a_bad_listen_address_is_refused_naming_the_flag(argv: list[str], error: str,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        build_parser().parse_args(argv)
    assert f"argument --web.listen-address: {error}" in capsys.readouterr().err


def test_two_different_ports_on_the_command_line_are_refused() -> None:
    args = build_parser().parse_args(["run", "--web.listen-address", ":9700", "--web.port", "9800"])
    with pytest.raises(ConfigError, match=r"says port 9700 and --web.port 9800"):
        cli._load(args)


def test_a_port_in_the_config_address_is_refused_pointing_at_web_port() -> None:
    with pytest.raises(ConfigError, match=r'web.listen_address: "0.0.0.0:9611" has a port: .* 9611 in web.port'):
        build_config({"web": {"listen_address": "0.0.0.0:9611"}})
    assert build_config({"web": {"listen_address": "[::]"}}).web.listen_address == "::"


@pytest.mark.parametrize(("code", "flag"), [
    (errno.EADDRINUSE, "--web.port"), (errno.EACCES, "--web.port"), (errno.EADDRNOTAVAIL, "--web.listen-address"),
])
def test_a_listen_failure_names_the_flag_to_change(code: int, flag: str) -> None:
    assert flag in cli._listen_hint(OSError(code, os.strerror(code)))


@pytest.mark.parametrize("command", ["check", "diagnose", "scan-logs"])
def test_every_reporting_command_takes_color(command: str) -> None:
    extra = ["some.log"] if command == "scan-logs" else []
    assert build_parser().parse_args([command, "--color", "always", *extra]).color == "always"


def test_a_misspelt_demo_fault_gets_a_suggestion_not_the_whole_list(capsys: pytest.CaptureFixture[str]) -> None:
    for argv in (["demo", "set", "linkdown"], ["demo", "clear", "linkdown"]):
        with pytest.raises(SystemExit):
            build_parser().parse_args(argv)
        err = capsys.readouterr().err
        assert "unknown fault 'linkdown'; did you mean link_down?" in err
        assert "hbm_dbe" not in err  # no dump of every choice
    assert build_parser().parse_args(["demo", "clear", "all"]).fault == "all"


def test_demo_set_help_describes_every_fault(capsys: pytest.CaptureFixture[str]) -> None:
    from agent.demo.faults import FAULTS

    with pytest.raises(SystemExit):
        main(["demo", "set", "--help"])
    out = capsys.readouterr().out
    for name, spec in FAULTS.items():
        assert f"  {name} ({spec.kind}): {spec.help[:30]}" in out.replace("\n      ", " "), name
    assert "codes: comma-separated hex error codes (list, default ['8C084E00'])" in out
