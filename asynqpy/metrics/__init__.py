"""Prometheus metrics of worker processes (built on the server's outcome hooks) and the small HTTP server that
serves /metrics, /livez and /readyz for workers and the exporter."""
