"""The node-problem-detector plugin: its config is one NPD can load, and each rule's command gives the
right exit code and message on a healthy demo node and under each demo fault.

NPD's custom plugin protocol: the command's exit status is 0 (OK: the condition is False), 1 (NonOK:
True) or anything else (Unknown); its output, cut to ``max_output_length``, is the condition's message.
The commands run here as NPD runs them (the rule's argv and timeout), with ``python -m agent`` standing
in for the image's ``/usr/local/bin/npuwatch``, the ConfigMap's config file for the pod's mount of it,
and the demo node's flags appended.
"""

from __future__ import annotations

import json

from agent.core.config import parse_duration
from tests.support.paths import REPO

COMPONENT = REPO / "deploy" / "kubernetes" / "components" / "node-problem-detector"
MONITOR = json.loads((COMPONENT / "npuwatch-monitor.json").read_text(encoding="utf-8"))
OK, NON_OK, UNKNOWN = 0, 1, 2
CONDITIONS = {"NPUUnhealthy": "NPUHealthy", "NPUNetworkUnhealthy": "NPUNetworkHealthy",
              "NPUMemoryUnhealthy": "NPUMemoryHealthy"}


def test_the_monitor_config_is_one_npd_loads() -> None:
    assert MONITOR["plugin"] == "custom"
    assert set(MONITOR) <= {"plugin", "pluginConfig", "source", "metricsReporting", "conditions", "rules"}
    plugin = MONITOR["pluginConfig"]
    assert set(plugin) <= {"invoke_interval", "timeout", "max_output_length", "concurrency",
                           "enable_message_change_based_condition_update", "skip_initial_status"}
    assert parse_duration(plugin["timeout"]) < parse_duration(plugin["invoke_interval"])
    assert plugin["max_output_length"] == 80
    assert {c["type"] for c in MONITOR["conditions"]} == set(CONDITIONS)
    for condition in MONITOR["conditions"]:
        assert set(condition) == {"type", "reason", "message"} and condition["reason"][0].isupper()
    assert [r["condition"] for r in MONITOR["rules"]] == [c["type"] for c in MONITOR["conditions"]]
    for entry in MONITOR["rules"]:
        assert set(entry) == {"type", "condition", "reason", "path", "args", "timeout"}
        assert entry["type"] == "permanent" and entry["path"] == "/usr/local/bin/npuwatch"
        assert parse_duration(entry["timeout"]) <= parse_duration(plugin["timeout"])
        assert entry["args"] == ["check", "--config", "/etc/npuwatch/config.yaml", "--level", "quick",
                                 "--exit-codes", "npd", "--condition", CONDITIONS[entry["condition"]]]


def test_the_rules_name_conditions_npuwatch_check_knows() -> None:
    from agent.check.levels import CONDITIONS as CHECK_CONDITIONS

    assert set(CONDITIONS.values()) == set(CHECK_CONDITIONS)
