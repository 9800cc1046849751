"""Grafana dashboards for npuwatch, written as code with grafana-foundation-sdk.

``python -m dashboards.generate`` writes the committed JSON under ``dashboards/json/``;
``dashboards.queries`` lets tests walk and run every panel query.
"""
