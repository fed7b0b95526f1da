"""Benchmarks of asynqpy side by side with Go asynq and other Python task queues (not tests)."""
