"""``npuwatch top``: a live terminal view of one node, read from its agent's /metrics."""
