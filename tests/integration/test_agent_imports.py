"""The running agent carries only what it uses: the other commands' packages and the HTTP clients stay out of
its memory (their imports were 2.7 MB of the agent's RSS at 16 chips; docs/benchmarks.md).

``npuwatch run --demo`` runs with Python's import log on (``PYTHONPROFILEIMPORTTIME``) until its verdict is
exported, which needs every collector's first run, so every import a round makes has happened.
"""

from __future__ import annotations

import re
from pathlib import Path

from tests.support.agent_harness import wait_for
from tests.support.daemon import BASE_CONFIG, Daemon

# Each was imported by `run` before: through the parser of another command, the check job's runner (tool readers,
# diagnose, triage's log scan: no medium or long level is scheduled here) and HTTP client, the probe job's
# command-line module, or prometheus_client (its package pulls in its HTTP servers and urllib).
NOT_IN_THE_AGENT = ("prometheus_client", "urllib.request", "http.client", "statistics", "agent.top", "agent.triage",
                    "agent.probes.cli", "agent.demo.cli", "agent.check.cli", "agent.handling.cli",
                    "agent.check.runner", "agent.diagnose")


def imported(log: str) -> set[str]:
    return {match.group(1) for match in re.finditer(r"^import time:\s+\d+ \|\s+\d+ \|\s+(\S+)$", log, re.M)}


def test_the_agent_does_not_import_other_commands_or_http_clients(tmp_path: Path) -> None:
    daemon = Daemon(tmp_path, BASE_CONFIG, env={"PYTHONPROFILEIMPORTTIME": "1"})
    try:
        assert wait_for(lambda: "npu_node_status{" in daemon.metrics(), timeout=60), daemon.log_text()[-3000:]
        log = daemon.log_text()
    finally:
        daemon.stop()
    modules = imported(log)
    assert "agent.daemon.service" in modules, log[-3000:]  # the log is read right
    assert sorted(name for name in modules
                  if any(name == unwanted or name.startswith(unwanted + ".") for unwanted in NOT_IN_THE_AGENT)) == []
