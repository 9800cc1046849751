"""Write every shipped alert rule file for another scrape job, into a folder of your own deployment.

    python -m alerts.retarget --selector 'job="npu-agents"' -o /etc/prometheus/npuwatch
    python -m alerts.retarget --selector 'job="npu-agents",cluster="a"' -o /tmp/rules   # rules only

The committed rules select the agent's series with ``job="npuwatch"``. This writes each
``alerts/*.rules.yml`` under ``--output`` with that matcher replaced by the selector's matchers: the node-fault
alerts and the fail-slow rules are generated for it (``alerts.generate``), the hand-written files (agent, HCCL,
probes, fleet, npu-exporter names) are rewritten matcher by matcher. When the selector only renames the job, their
promtool cases are written too (``tests/*-test.yml``, whose input series and expected labels name the job), so
``promtool test rules OUT/tests/*-test.yml`` checks the copy as CI checks the originals; a selector with other
matchers gets the rules only, since the cases cannot know which alerts keep the extra labels.

Hand-written because it is a literal rewrite of one matcher, checked afterwards: a file in which any
``job="npuwatch"`` is left, or that promtool refuses, is a bug the tests catch.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

if __package__ in (None, ""):  # run as `python alerts/retarget.py`
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from alerts import generate

__all__ = ["MATCHER", "main", "retarget"]

HERE = Path(__file__).resolve().parent
MATCHER = 'job="npuwatch"'
_CASE_LABEL = "job: npuwatch"


def _matchers(selector: str) -> dict[str, str]:
    matchers = generate.parse_selector(selector)
    if matchers.get("job") == "not-npuwatch":
        raise ValueError("job=\"not-npuwatch\" is the other job the promtool cases keep silent")
    return matchers


def retarget(selector: str) -> dict[str, str]:
    """Every rule file (and, for a job-only selector, its cases) for ``selector``: relative path -> text."""
    matchers = _matchers(selector)
    replacement = ", ".join(f'{name}="{value}"' for name, value in matchers.items())
    made = generate.generate(selector)
    out: dict[str, str] = {}
    for path in sorted(HERE.glob("*.rules.yml")):
        if path == generate.RULES:
            out[path.name] = made.rules
        elif path == generate.FAILSLOW:
            out[path.name] = made.failslow
        else:
            out[path.name] = path.read_text(encoding="utf-8").replace(MATCHER, replacement)
    if set(matchers) == {"job"}:
        job = matchers["job"]
        for path in sorted((HERE / "tests").glob("*-test.yml")):
            name = f"tests/{path.name}"
            if path == generate.TESTS:
                out[name] = made.tests
            else:
                text = path.read_text(encoding="utf-8")
                out[name] = text.replace(MATCHER, f'job="{job}"').replace(_CASE_LABEL, f"job: {job}")
    return out


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--selector", required=True,
                        help="label matchers of the agent's series, e.g. job=\"npu-agents\"")
    parser.add_argument("-o", "--output", type=Path, required=True,
                        help="folder to write the rule files (and tests/) in")
    args = parser.parse_args(argv)
    try:
        files = retarget(args.selector)
    except ValueError as exc:
        parser.error(str(exc))
    for name, text in files.items():
        target = args.output / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")
    cases = sum(1 for name in files if name.startswith("tests/"))
    print(f"wrote {len(files) - cases} rule files and {cases} promtool case files under {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
