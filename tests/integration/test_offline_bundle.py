"""The air-gapped install: build the offline bundle for this machine, install it with no index reachable,
run the demo from the installed agent."""

from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
import tarfile
from pathlib import Path

import pytest

from tests.support.paths import REPO

pytestmark = pytest.mark.slow


def this_platform() -> str:
    machine = sysconfig.get_platform().split("-")[-1]  # linux-x86_64 / linux-aarch64
    return f"manylinux2014_{machine}"


def test_the_offline_bundle_installs_without_an_index_and_runs_the_demo(tmp_path: Path) -> None:
    python = f"{sys.version_info.major}.{sys.version_info.minor}"
    build = subprocess.run([sys.executable, str(REPO / "scripts" / "offline_bundle.py"), "--platform", this_platform(),
                            "--python", python, "-o", str(tmp_path / "dist")],
                           capture_output=True, text=True, timeout=900)
    assert build.returncode == 0, build.stderr[-3000:]
    (bundle,) = (tmp_path / "dist").glob("npuwatch-*-offline-*.tar.gz")
    with tarfile.open(bundle) as archive:
        names = archive.getnames()
        archive.extractall(tmp_path / "unpacked", filter="data")
    wheels = {Path(name).name.split("-")[0].lower() for name in names if name.endswith(".whl")}
    assert {"npuwatch", "psutil", "prometheus_client", "apscheduler", "pyyaml", "tzlocal", "bcrypt"} <= wheels
    (root,) = (tmp_path / "unpacked").iterdir()
    for name in ("install.sh", "npuwatch.service", "config.example.yaml"):
        assert (root / name).is_file(), name
    # No index reachable: pip may only read the bundle (install.sh passes --no-index; the proxy and
    # index settings below would fail any attempt to go out).
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path), "PREFIX": str(tmp_path / "opt"),
           "DESTDIR": str(tmp_path / "root"), "PYTHON": sys.executable, "PIP_INDEX_URL": "http://127.0.0.1:9/simple",
           "HTTPS_PROXY": "http://127.0.0.1:9", "HTTP_PROXY": "http://127.0.0.1:9"}
    install = subprocess.run(["sh", str(root / "install.sh")], capture_output=True, text=True, timeout=600, env=env)
    assert install.returncode == 0, install.stdout + install.stderr
    live = (tmp_path / "root" / "etc" / "npuwatch" / "config.yaml").read_text()
    assert [line for line in live.splitlines() if "example" in line and not line.lstrip().startswith("#")] == []
    assert "expected_chips: 0 " in live and "expected_chips left at 0, unknown" in install.stderr  # no npu-smi here
    unit = (tmp_path / "root" / "etc" / "systemd" / "system" / "npuwatch.service").read_text()
    assert f"{tmp_path / 'opt'}/bin/npuwatch run" in unit
    once = subprocess.run([str(tmp_path / "opt" / "bin" / "npuwatch"), "once", "--demo", "--demo-dir",
                           str(tmp_path / "demo")], capture_output=True, text=True, timeout=300, cwd=tmp_path, env=env)
    assert "npu_chips 8.0" in once.stdout, once.stderr[-3000:]
    again = subprocess.run(["sh", str(root / "install.sh")], capture_output=True, text=True, timeout=600, env=env)
    assert again.returncode == 0 and "keeping" in again.stderr  # a second run keeps the config
