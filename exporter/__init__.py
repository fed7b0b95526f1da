"""The Prometheus exporter of queue state: a collector on the Inspector's shared snapshot, and `asynqpy exporter`."""
