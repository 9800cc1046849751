"""The agent's side of the DCMI backend: find the library, run its worker, serialise calls node-wide.

``collectors.dcmi`` holds what talks to the library (and the worker that loads it); this package
holds what runs processes: ``locate`` (``ldconfig -p`` through the tool runner), ``client`` (the
worker's lifecycle, deadlines, restarts) and ``lock`` (one npuwatch process calls DCMI at a time).
Not wired into collection yet (docs/dcmi.md).
"""
