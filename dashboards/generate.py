"""Write (or, with --check, verify) the committed Grafana dashboard JSON.

    python -m dashboards.generate            # rewrite dashboards/json/*.json
    python -m dashboards.generate --check    # exit 1 when the committed JSON is stale
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as `python dashboards/generate.py`
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from grafana_foundation_sdk.builders.dashboard import Dashboard

from dashboards import fleet_overview, interconnect, node_detail
from dashboards.render import dumps, render

__all__ = ["DASHBOARDS", "JSON_DIR", "build_all", "main", "write_all"]

JSON_DIR = Path(__file__).resolve().parent / "json"

# File name -> builder. The file names and the uids inside are a contract (links, provisioning).
DASHBOARDS: dict[str, Callable[[], Dashboard]] = {
    "npu-fleet-overview.json": fleet_overview.build,
    "npu-node-detail.json": node_detail.build,
    "npu-interconnect-hccl.json": interconnect.build,
}


def build_all() -> dict[str, dict[str, Any]]:
    """Every dashboard as a JSON-ready dict, keyed by its file name."""
    return {name: render(builder()) for name, builder in DASHBOARDS.items()}


def write_all(directory: Path = JSON_DIR) -> list[Path]:
    directory.mkdir(parents=True, exist_ok=True)
    written = []
    for name, document in build_all().items():
        path = directory / name
        path.write_text(dumps(document), encoding="utf-8")
        written.append(path)
    return written


def stale_files(directory: Path = JSON_DIR) -> list[str]:
    """Names of the files in ``directory`` that differ from a fresh generation (or are missing)."""
    stale = []
    for name, document in build_all().items():
        path = directory / name
        if not path.is_file() or path.read_text(encoding="utf-8") != dumps(document):
            stale.append(name)
    return stale


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m dashboards.generate", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--check", action="store_true",
                        help="do not write; exit 1 when a committed file differs from the generated one")
    parser.add_argument("--out", type=Path, default=JSON_DIR,
                        help="directory for the JSON files (default: %(default)s)")
    args = parser.parse_args(argv)
    if args.check:
        stale = stale_files(args.out)
        for name in stale:
            print(f"stale: {args.out / name} (run `python -m dashboards.generate`)", file=sys.stderr)
        return 1 if stale else 0
    for path in write_all(args.out):
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
