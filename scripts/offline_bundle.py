#!/usr/bin/env python3
"""Build an offline install bundle for air-gapped Ascend nodes.

    python3 scripts/offline_bundle.py --platform manylinux2014_aarch64 --python 3.9

writes ``dist/npuwatch-<version>-offline-<platform>-cp<XY>.tar.gz`` holding the npuwatch wheel, every
runtime dependency as a wheel for that platform and Python (``pip download --only-binary=:all:``, so no
compiler is needed on the node), the systemd unit, the example config and ``install.sh`` (a venv in
``/opt/npuwatch`` installed with ``pip --no-index``, the ``npuwatch`` user, the state directory, the
config, ``check-config``). Kunpeng hosts are aarch64; x86_64 hosts take ``manylinux2014_x86_64``.

Runs on the build machine (needs pip and a package index); nothing here runs on the node but install.sh.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PLATFORMS = ("manylinux2014_x86_64", "manylinux2014_aarch64")
# Optional extras that belong in an offline bundle: bcrypt for basic auth in the web config.
EXTRAS = ("auth",)


def project_version() -> str:
    text = (REPO / "pyproject.toml").read_text(encoding="utf-8")
    match = re.search(r'^version = "([^"]+)"', text, re.M)
    if match is None:
        raise SystemExit("pyproject.toml has no version")
    return match.group(1)


def runtime_requirements() -> list[str]:
    """The ``dependencies`` and the bundled extras of pyproject.toml, as pip requirement strings."""
    text = (REPO / "pyproject.toml").read_text(encoding="utf-8")
    requirements = _array(text, "dependencies")
    for extra in EXTRAS:
        requirements += _array(text, extra)
    return requirements


def _array(text: str, key: str) -> list[str]:
    match = re.search(rf"^{re.escape(key)} = \[(.*?)\]", text, re.M | re.S)
    if match is None:
        raise SystemExit(f"pyproject.toml has no {key} list")
    return re.findall(r'"([^"]+)"', match.group(1))


def run(argv: list[str]) -> None:
    print("+", " ".join(argv), file=sys.stderr)
    subprocess.run(argv, check=True)


def build(platform: str, python: str, out_dir: Path, pip_args: list[str]) -> Path:
    version = project_version()
    tag = "cp" + python.replace(".", "")
    name = f"npuwatch-{version}-offline-{platform}-{tag}"
    with tempfile.TemporaryDirectory(prefix="npuwatch-offline-") as tmp:
        root = Path(tmp) / name
        wheels = root / "wheels"
        wheels.mkdir(parents=True)
        run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--wheel-dir", str(wheels), str(REPO), *pip_args])
        run([sys.executable, "-m", "pip", "download", "--only-binary=:all:", "--platform", platform,
             "--python-version", python, "--implementation", "cp", "--dest", str(wheels), *pip_args,
             *runtime_requirements()])
        shutil.copy2(REPO / "systemd" / "npuwatch.service", root / "npuwatch.service")
        shutil.copy2(REPO / "systemd" / "config.example.yaml", root / "config.example.yaml")
        shutil.copy2(REPO / "scripts" / "install.sh", root / "install.sh")
        (root / "install.sh").chmod(0o755)
        out_dir.mkdir(parents=True, exist_ok=True)
        bundle = out_dir / f"{name}.tar.gz"
        with tarfile.open(bundle, "w:gz") as archive:
            archive.add(root, arcname=name)
    return bundle


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("--platform", default=PLATFORMS[0],
                        help=f"wheel platform tag of the nodes ({', '.join(PLATFORMS)}; default %(default)s)")
    parser.add_argument("--python", default=f"{sys.version_info.major}.{sys.version_info.minor}",
                        help="the nodes' python3 version, e.g. 3.9 (default: this interpreter's)")
    parser.add_argument("-o", "--out-dir", type=Path, default=REPO / "dist", help="where the bundle goes")
    parser.add_argument("--pip-arg", action="append", default=[], metavar="ARG",
                        help="extra argument for pip wheel/download (e.g. --index-url=...)")
    args = parser.parse_args(argv)
    if not re.fullmatch(r"3\.\d+", args.python):
        parser.error("--python takes a version like 3.9")
    bundle = build(args.platform, args.python, args.out_dir, args.pip_arg)
    print(f"{bundle} ({os.path.getsize(bundle) / 1e6:.1f} MB)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
