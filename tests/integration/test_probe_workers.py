"""Probe workers and the peak table: the checks that decide correct / incorrect, and the protocol."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import pytest

from tests.support.paths import REPO

PROBES_DIR = REPO / "collectors" / "probes"


# --------------------------------------------------------------------------- peaks


# --------------------------------------------------------------------------- worker internals


# --------------------------------------------------------------------------- Freivalds tolerance, both sides
#
# A rank-1 product (k = 1: C_ij = A_i0 * B_0j) keeps the fp32 accumulation term at its
# minimum, so the output-rounding term decides. Row values 1 + (m + 0.49) ulp round to
# nearest as 1 + m ulp: every element of the row is off by 0.49 ulp in the same direction,
# the worst a correctly rounded result can be. With x = 1 the row's residual is the sum of
# those errors. ``n`` is chosen so that this honest worst case sits at ~0.85 of the
# tolerance; ``planted_ulps`` more on one element takes it to ~1.13.


# --------------------------------------------------------------------------- timing recipe


# --------------------------------------------------------------------------- protocol


def test_worker_reports_bad_arguments_as_error_before_importing_torch() -> None:
    proc = subprocess.run(
        [sys.executable, str(PROBES_DIR / "gemm.py"), "--backend", "cpu", "--dtypes", "fp8"],
        capture_output=True, text=True, timeout=60, check=False)
    result = json.loads(proc.stdout)
    assert proc.returncode == 3
    assert result["status"] == "error"
    assert "fp8" in result["message"]
    assert "backend" not in result  # torch was never loaded
    stages = [json.loads(line.split(" ", 1)[1])["stage"] for line in proc.stderr.splitlines()
              if line.startswith("@npuwatch-stage ")]
    assert stages == ["setup"]


@pytest.fixture(scope="module")
def workers() -> Iterator[tuple[Any, Any, Any]]:
    # Imported under their package names (mutmut matches mutants by module name); the workers' own
    # ``import _common`` still needs their directory on the path.
    sys.path.insert(0, str(PROBES_DIR))
    try:
        import collectors.probes._common as common
        from collectors.probes import allreduce, gemm
    finally:
        sys.path.remove(str(PROBES_DIR))
    yield common, gemm, allreduce


# --------------------------------------------------------------------------- _common: test hooks


# --------------------------------------------------------------------------- _common: the protocol


# --------------------------------------------------------------------------- gemm and allreduce maths


# --------------------------------------------------------------------------- gemm: Freivalds on the host


# --------------------------------------------------------------------------- membw, p2p, sustained GEMM: host maths
