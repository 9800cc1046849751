"""End-to-end tier: real Prometheus and Alertmanager, fleets of agents."""
