"""Node triage commands: `npuwatch diagnose` (engine and checks) and `npuwatch scan-logs`."""
