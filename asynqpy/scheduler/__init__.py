"""Periodic tasks: Scheduler (cron specs with time zones, any number of replicas, each tick enqueued once)
and PeriodicTaskManager (entries from a provider such as a YAML file, changed without a restart)."""

from asynqpy.scheduler.clocks import Clock, SystemClock
from asynqpy.scheduler.core import EntryInfo, Scheduler
from asynqpy.scheduler.manager import (
    ConfigError,
    ConfigProvider,
    PeriodicTaskConfig,
    PeriodicTaskManager,
    YamlFileProvider,
)

__all__ = [
    "Clock",
    "ConfigError",
    "ConfigProvider",
    "EntryInfo",
    "PeriodicTaskConfig",
    "PeriodicTaskManager",
    "Scheduler",
    "SystemClock",
    "YamlFileProvider",
]
