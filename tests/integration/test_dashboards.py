"""Static checks of the committed Grafana dashboards (dashboards/json/*.json).

The regeneration tests need grafana-foundation-sdk (the `dashboards` extra);
the others read only the committed JSON.
"""

from __future__ import annotations

import subprocess
import sys

from tests.support.paths import REPO

# --- (1) the committed JSON is what the code generates ------------------------------------------


def test_script_entry_point_checks_the_committed_files() -> None:
    result = subprocess.run([sys.executable, "dashboards/generate.py", "--check"], cwd=REPO,
                            capture_output=True, text=True, timeout=60, check=False)
    assert result.returncode == 0, result.stderr


# --- (2) schema -------------------------------------------------------------------------------------


# --- (3) every metric and label a query reads exists ------------------------------------------------


# --- (4) datasource, unit, thresholds, grid -------------------------------------------------------


# --- (5) uids and ids -------------------------------------------------------------------------------


# --- queries.substitute, as the end-to-end test uses it -------------------------------------------
