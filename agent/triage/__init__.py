"""Cluster triage of HCCL timeouts: ``npuwatch bundle`` and ``npuwatch triage``.

``evidence`` holds the source-agnostic records (built from log files, bundles or Prometheus
series), ``engine.analyze`` turns them into incidents with ranked culprits, ``faults`` is the
local-fault vocabulary and scoring that ``npuwatch diagnose`` shares, ``render`` prints a report.
"""
