"""HTTP serving of /metrics and /healthz: the server, its web config, TLS and authentication, limits."""
