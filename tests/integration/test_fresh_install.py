"""The way in, as a new user takes it: the README's demo command in a fresh copy of the repository, and
npuwatch installed from a built wheel into a clean virtual environment (the demo fakes and the probe
workers must travel as package files)."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
import venv
from pathlib import Path

import pytest

from tests.support.agent_harness import free_port, get
from tests.support.paths import REPO
from tests.support.readme import readme_command

pytestmark = pytest.mark.slow


def fresh_copy(destination: Path) -> Path:
    """The files a clone of this working tree would hold (tracked, plus new files git does not ignore)."""
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=REPO,
                            capture_output=True, check=True, timeout=60).stdout.decode().split("\0")
    for name in filter(None, listed):
        source = REPO / name
        if not source.is_file():
            continue  # deleted in the working tree
        target = destination / name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(source, target)
    return destination


def clean_env(**extra: str) -> dict[str, str]:
    """The environment without PYTHONPATH: an installed npuwatch must not import this checkout instead."""
    env = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}
    env.update(extra)
    return env


def wait_for_metrics(url: str, proc: subprocess.Popen[bytes], log: Path, timeout: float) -> bytes:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert proc.poll() is None, log.read_text(errors="replace")[-3000:]
        status, body, _ = get(url, timeout=2)
        if status == 200 and b"npu_chips 8.0" in body:
            return body
        time.sleep(1)
    raise AssertionError(f"no demo metrics within {timeout:.0f}s: {log.read_text(errors='replace')[-3000:]}")


def stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(5)


def test_the_readme_demo_command_serves_metrics_from_a_fresh_copy(tmp_path: Path) -> None:
    clone = fresh_copy(tmp_path / "clone")
    command = readme_command("Try it on a fresh machine")
    port = free_port()
    log = tmp_path / "demo.log"
    started = time.monotonic()
    with log.open("wb") as out:
        proc = subprocess.Popen([*command.split(), "--port", str(port)], cwd=clone, stdout=out, stderr=out,
                                env=clean_env(NPUWATCH_DEMO_DIR=str(tmp_path / "demo")),
                                start_new_session=True)
    try:
        body = wait_for_metrics(f"http://127.0.0.1:{port}/metrics", proc, log, timeout=600)
        assert b'npuwatch_collector_up{collector="npu_smi_info"} 1.0' in body
        print(f"fresh copy to live /metrics: {time.monotonic() - started:.1f}s")
        assert (clone / ".venv" / "bin" / "npuwatch").exists()
    finally:
        stop(proc)


def test_a_built_wheel_installs_and_runs_the_demo(tmp_path: Path) -> None:
    clone = fresh_copy(tmp_path / "src")
    subprocess.run([sys.executable, "-m", "build", "--wheel", "--outdir", str(tmp_path / "dist"), str(clone)],
                   check=True, capture_output=True, timeout=600)
    (wheel,) = (tmp_path / "dist").glob("npuwatch-*.whl")
    env_dir = tmp_path / "venv"
    venv.create(env_dir, with_pip=True)
    python = env_dir / "bin" / "python"
    installed = subprocess.run([str(python), "-m", "pip", "install", "-q", str(wheel)], capture_output=True,
                               text=True, timeout=600, env=clean_env())
    assert installed.returncode == 0, installed.stderr
    where = ("import agent, collectors.probes, os; print(os.path.dirname(agent.__file__)); "
             "print(os.path.dirname(collectors.probes.__file__))")
    site = subprocess.run([str(python), "-c", where], capture_output=True, text=True, check=True, timeout=60,
                          cwd=tmp_path, env=clean_env()).stdout.split()
    assert str(env_dir) in site[0]
    for worker in ("gemm.py", "allreduce.py", "_common.py"):
        assert (Path(site[1]) / worker).is_file(), worker
    port = free_port()
    log = tmp_path / "agent.log"
    with log.open("wb") as out:
        proc = subprocess.Popen([str(env_dir / "bin" / "npuwatch"), "run", "--demo", "--demo-dir",
                                 str(tmp_path / "demo"), "--port", str(port)], cwd=tmp_path, stdout=out,
                                stderr=out, start_new_session=True, env=clean_env())
    try:
        wait_for_metrics(f"http://127.0.0.1:{port}/metrics", proc, log, timeout=120)
        fake = (tmp_path / "demo" / "bin" / "npu-smi").read_text()
        assert str(env_dir) in fake and str(REPO) not in fake  # the fakes run from the installed package
    finally:
        stop(proc)
