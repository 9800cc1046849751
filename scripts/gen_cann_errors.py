"""Regenerate the packaged CANN error table from the reference catalogue.

    python scripts/gen_cann_errors.py                 # write collectors/fault_data/cann_errors.json
    python scripts/gen_cann_errors.py --check         # exit 1 when the checked-in table differs
    python scripts/gen_cann_errors.py --reference DIR # another copy of shared/reference/cann_errors

The reference is ../shared/reference/cann_errors beside the checkout, or $NPUWATCH_REFERENCE/cann_errors.
How codes become classes: collectors/hccl/fault_classes.py; the table's shape: collectors/hccl/errtable_build.py.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:  # run as a script from anywhere: import this checkout's packages
    sys.path.insert(0, str(REPO))

from collectors.hccl.errtable_build import build, render  # noqa: E402

TABLE = REPO / "collectors" / "fault_data" / "cann_errors.json"


def default_reference() -> Path:
    root = os.environ.get("NPUWATCH_REFERENCE")
    return (Path(root) if root else REPO.parent / "shared" / "reference") / "cann_errors"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reference", type=Path, default=None, help="the cann_errors reference folder")
    parser.add_argument("--check", action="store_true", help="exit 1 when the checked-in table is stale")
    args = parser.parse_args(argv)
    folder = args.reference or default_reference()
    if not (folder / "cann_error_codes.csv").is_file():
        print(f"no reference catalogue at {folder}", file=sys.stderr)
        return 2
    text = render(build(folder))
    if args.check:
        if TABLE.read_text(encoding="utf-8") != text:
            print(f"{TABLE.relative_to(REPO)} is stale: run python scripts/gen_cann_errors.py", file=sys.stderr)
            return 1
        return 0
    TABLE.write_text(text, encoding="utf-8")
    print(f"wrote {TABLE.relative_to(REPO)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
