"""Interop tests against the real Go hibiken/asynq (see goasynq.py)."""
